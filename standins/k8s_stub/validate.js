#!/usr/bin/env node
// standins/k8s_stub/validate.js - validate Kubernetes manifests (YAML, many documents a file)
// against the official schemas (kubernetes-models). Prints one line per object; exits 1 when
// any is invalid or of a kind it does not know. Usage: node validate.js FILE...
'use strict';
const fs = require('fs');
const yaml = require('js-yaml');

let bad = 0;
for (const file of process.argv.slice(2)) {
  for (const doc of yaml.loadAll(fs.readFileSync(file, 'utf8'))) {
    if (!doc) continue;
    const group = doc.apiVersion.includes('/') ? doc.apiVersion : doc.apiVersion;
    let Model;
    try {
      Model = require(`kubernetes-models/${group}/${doc.kind}`)[doc.kind];
    } catch (e) {
      console.log(`${file}: ${doc.apiVersion} ${doc.kind}: unknown kind`);
      bad++;
      continue;
    }
    try {
      new Model(doc).validate();
      console.log(`${file}: ${doc.kind}/${doc.metadata.name}: valid`);
    } catch (e) {
      console.log(`${file}: ${doc.kind}/${(doc.metadata || {}).name}: ${e.message}`);
      bad++;
    }
  }
}
process.exit(bad ? 1 : 0);
