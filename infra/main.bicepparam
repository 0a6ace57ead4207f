// Parameters for infra/main.bicep. scripts/deploy-azure passes appPrincipalId itself;
// `az deployment group create -g RG -p infra/main.bicepparam` reads it from the environment.
using './main.bicep'

param appPrincipalId = readEnvironmentVariable('APP_PRINCIPAL_ID')

// Serverless, single region, no public network access: the defaults of main.bicep.
// To try it from a laptop, allow your address instead of using a private endpoint:
// param publicNetworkAccess = 'Enabled'
// param ipAllowList = ['203.0.113.7']
