// What CosmosStore needs in Azure, and nothing more: a Cosmos DB for NoSQL account
// that accepts Entra ID only, the database and container the store expects
// (partition key /run: a run's head and its segments, TTL on), and a data-plane role
// for the application.
// Deploy: scripts/deploy-azure RESOURCE_GROUP [LOCATION]   (see docs/deploying.md)

targetScope = 'resourceGroup'

@description('Cosmos DB account name: globally unique, 3-44 lowercase letters, digits and hyphens.')
@minLength(3)
@maxLength(44)
param accountName string = 'durable-${uniqueString(resourceGroup().id)}'

@description('Primary region.')
param location string = resourceGroup().location

@description('Extra regions for geo-replication, e.g. [\'northeurope\']. Needs provisioned throughput: serverless accounts are single-region.')
param additionalLocations array = []

@description('0 = serverless (pay per request; the default). A number = provisioned autoscale throughput with this maximum RU/s (1000 or more).')
param autoscaleMaxThroughput int = 0

@description('Public network access. Disabled by default: reach the account through a private endpoint, or enable it with an IP allow-list.')
@allowed([
  'Enabled'
  'Disabled'
])
param publicNetworkAccess string = 'Disabled'

@description('IP addresses or CIDR ranges allowed when public network access is enabled.')
param ipAllowList array = []

@description('Database name; the app reads it from COSMOS_DATABASE (default durable).')
param databaseName string = 'durable'

@description('Container name; the app reads it from COSMOS_CONTAINER (default checkpoints).')
param containerName string = 'checkpoints'

@description('Default time-to-live of checkpoints in seconds. -1: TTL on with no default, so a per-run ttl can expire finished runs.')
param defaultTtlSeconds int = -1

@description('Object (principal) id of the identity the app runs as (managed identity, or your user for a laptop); it gets Cosmos DB Built-in Data Contributor.')
param appPrincipalId string

var serverless = autoscaleMaxThroughput == 0
var primaryLocation = [
  {
    locationName: location
    failoverPriority: 0
    isZoneRedundant: false
  }
]
var replicaLocations = [for (region, i) in additionalLocations: {
  locationName: region
  failoverPriority: i + 1
  isZoneRedundant: false
}]
var locations = concat(primaryLocation, replicaLocations)
// Built-in data-plane role: read and write items, read metadata. It cannot create
// or delete databases and containers, which is why the store never tries to.
var dataContributorRoleId = '00000000-0000-0000-0000-000000000002'

resource account 'Microsoft.DocumentDB/databaseAccounts@2024-05-15' = {
  name: accountName
  location: location
  kind: 'GlobalDocumentDB'
  properties: {
    databaseAccountOfferType: 'Standard'
    consistencyPolicy: {
      defaultConsistencyLevel: 'Session'
    }
    locations: locations
    enableAutomaticFailover: length(additionalLocations) > 0
    // One write region: an etag-conditional write is then decided in one place. With
    // multi-region writes, two regions could both accept a save of the same run
    // and resolve it last-writer-wins, the silent overwrite ConflictError prevents.
    enableMultipleWriteLocations: false
    capabilities: serverless ? [
      {
        name: 'EnableServerless'
      }
    ] : []
    // Entra ID only: no account key exists that could leak, be shared or be rotated late.
    disableLocalAuth: true
    // Only Azure Resource Manager (control plane, audited, RBAC) changes databases,
    // containers and throughput; data-plane callers cannot.
    disableKeyBasedMetadataWriteAccess: true
    minimalTlsVersion: 'Tls12'
    publicNetworkAccess: publicNetworkAccess
    ipRules: [for ip in ipAllowList: {
      ipAddressOrRange: ip
    }]
    // Point-in-time restore for the last 7 days: a bad deploy that corrupts or deletes
    // checkpoints can be undone.
    backupPolicy: {
      type: 'Continuous'
      continuousModeProperties: {
        tier: 'Continuous7Days'
      }
    }
  }
}

resource database 'Microsoft.DocumentDB/databaseAccounts/sqlDatabases@2024-05-15' = {
  parent: account
  name: databaseName
  properties: {
    resource: {
      id: databaseName
    }
  }
}

resource container 'Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers@2024-05-15' = {
  parent: database
  name: containerName
  properties: {
    resource: {
      id: containerName
      // Every item of a run (its head, id = run id, and its segments) has run = the run id:
      // a run is one logical partition, and every request about it is single-partition.
      // Containers of the earlier layout (/id) keep working; see docs/cosmos-db.md.
      partitionKey: {
        paths: [
          '/run'
        ]
        kind: 'Hash'
        version: 2
      }
      defaultTtl: defaultTtlSeconds
      // The data (a head's inline state and journal, a segment's change or text) is read
      // by id and by generation, never queried: not indexing it makes saves cheaper.
      // '/*' keeps seg, workflow, status, lease_expires, wake_at and deadline range-indexed:
      // a worker's look filters on them (no ORDER BY: no composite index); doctor checks.
      indexingPolicy: {
        indexingMode: 'consistent'
        includedPaths: [
          {
            path: '/*'
          }
        ]
        excludedPaths: [
          {
            path: '/state/*'
          }
          {
            path: '/calls/*'
          }
          {
            path: '/change/*'
          }
          {
            path: '/data/*'
          }
          {
            path: '/text/?'
          }
          {
            path: '/"_etag"/?'
          }
        ]
      }
    }
    options: serverless ? {} : {
      autoscaleSettings: {
        maxThroughput: autoscaleMaxThroughput
      }
    }
  }
}

resource dataContributor 'Microsoft.DocumentDB/databaseAccounts/sqlRoleAssignments@2024-05-15' = {
  parent: account
  name: guid(account.id, appPrincipalId, dataContributorRoleId)
  properties: {
    roleDefinitionId: '${account.id}/sqlRoleDefinitions/${dataContributorRoleId}'
    principalId: appPrincipalId
    scope: account.id
  }
}

// Named like the app's environment variables, so they can be exported as they are.
output COSMOS_ENDPOINT string = account.properties.documentEndpoint
output COSMOS_DATABASE string = database.name
output COSMOS_CONTAINER string = container.name
