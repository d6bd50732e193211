#!/usr/bin/env node
// standins/k8s_stub/server.js - a Kubernetes API stand-in for autopatch's tests.
//
// It implements the subset of the API that sandbox/k8s.c uses, over HTTPS, and runs every pod
// as real local Docker containers, so sandbox commands really execute:
//   /api/v1/namespaces/NS/pods            POST, GET (labelSelector)
//   /api/v1/namespaces/NS/pods/NAME       GET, DELETE
//   /api/v1/namespaces/NS/pods/NAME/exec  GET/POST upgraded to a WebSocket: v5.channel.k8s.io
//                                         and v4.channel.k8s.io (--protocols picks which)
//   /api/v1/namespaces/NS/pods/NAME/log   GET
//   /apis/networking.k8s.io/v1/namespaces/NS/networkpolicies[/NAME]  POST, GET, DELETE
//   /version
// Every object received is validated against the official schemas (kubernetes-models), pods
// also against the "restricted" Pod Security Standard (the namespace is labelled to enforce
// it), and a box pod (labelled autopatch.owner) against the rest of issue 15's hardening, as an
// operator's admission policy would (boxViolations: no service-account token or service links,
// read-only root, uid 10001, cpu/memory/ephemeral-storage limits, memory emptyDirs with a
// sizeLimit, a wall limit, a deny-all egress policy made first, --require-runtime-class); answers and errors are the API's own Status objects and codes (401, 403, 404, 409, 422).
// Authentication: a bearer token or a client certificate signed by --ca. Authorization: the
// rules of a Role file (--role, e.g. deploy/kubernetes/rbac.yaml): a verb/resource the Role
// does not grant is 403 "... cannot VERB resource RES in API group G in the namespace NS".
//
// Pod -> Docker: each container is `docker create`d with the equivalent hardening (user, read-
// only root, cap drop, no-new-privileges, memory/cpu limits, the kubelet's podPidsLimit), every
// emptyDir is a Docker tmpfs volume (sizeLimit = size; shared by the pod's containers as in a
// pod), the containers share the first one's network namespace, which is `none` when an
// egress-denying NetworkPolicy selects the pod and none allows anything, else the default
// bridge. A pod whose policies allow egress (ipBlock CIDRs and TCP ports) gets an Internal
// Docker network of its own (nothing forwarded) and an iptables chain on the host's INPUT for
// its bridge: ACCEPT per allowed CIDR and port, then DROP (IPv6 from the bridge: DROP). Every
// policy create or delete rewrites the chains of the pods it selects, so the enforcement is
// real: the CNI's job, done with iptables (needs root). See docs/kubernetes.md.
// activeDeadlineSeconds kills the pod (phase Failed, reason DeadlineExceeded).
//
// Usage: node server.js --cert C --key K --ca CA --token T --namespace NS --role FILE
//                       [--port 0] [--protocols v5.channel.k8s.io,v4.channel.k8s.io]
//                       [--pod-pids-limit 512] [--runtime-class NAME=HANDLER]...
//                       [--require-runtime-class NAME] [--runsc-pids-headroom 256]
//                       [--cni-ignores-policy-deletes] [--kubelet-delay-ms 300]
//                       [--deny-exec MESSAGE]
// Prints {"port": N} on stdout when listening.
//
// What a real API server and kubelet do that a client must not rely on being otherwise:
// - DELETE of a pod with grace 0 (gracePeriodSeconds=0, or a pod whose
//   terminationGracePeriodSeconds is 0, or one not running) removes the object at once; the
//   "kubelet" stops its containers --kubelet-delay-ms later. A graceful DELETE keeps the object,
//   with metadata.deletionTimestamp, until the kubelet has stopped the containers (after the
//   same delay, SIGTERM, SIGKILL at the end of the grace period); then the object goes.
// - fieldValidation: Strict refuses an unknown field (400 BadRequest, "strict decoding
//   error"); Warn (the default when absent) drops it with a `Warning: 299 - "unknown field
//   ..."` header; Ignore drops it silently. Known fields are those of the official API types
//   (@kubernetes/client-node's models).
// GET /stub/report (authenticated) tells the tests what a real cluster would hide: every
// Warning sent, every write from autopatch without fieldValidation=Strict, every moment a box
// pod's container ran while no deny-all NetworkPolicy selected it, and the Host and Origin of
// each exec upgrade.
'use strict';

const https = require('https');
const fs = require('fs');
const crypto = require('crypto');
const { spawn, execFile } = require('child_process');
const { WebSocketServer } = require('ws');
const yaml = require('js-yaml');
const { Pod } = require('kubernetes-models/v1/Pod');
const { NetworkPolicy } = require('kubernetes-models/networking.k8s.io/v1/NetworkPolicy');

// --- options ---------------------------------------------------------------------------

const opts = { port: 0, protocols: ['v5.channel.k8s.io', 'v4.channel.k8s.io'], podPidsLimit: 512,
  runtimeClasses: { gvisor: 'runsc' }, token: null, namespace: 'autopatch-sandbox',
  runscPidsHeadroom: 256, kubeletDelayMs: 300 };
for (let i = 2; i < process.argv.length; i++) {
  const a = process.argv[i], v = process.argv[i + 1];
  if (a === '--port') { opts.port = +v; i++; }
  else if (a === '--cert') { opts.cert = v; i++; }
  else if (a === '--key') { opts.key = v; i++; }
  else if (a === '--ca') { opts.ca = v; i++; }
  else if (a === '--token') { opts.token = v; i++; }
  else if (a === '--namespace') { opts.namespace = v; i++; }
  else if (a === '--role') { opts.role = v; i++; }
  else if (a === '--protocols') { opts.protocols = v.split(','); i++; }
  else if (a === '--pod-pids-limit') { opts.podPidsLimit = +v; i++; }
  else if (a === '--runtime-class') { const [n, h] = v.split('='); opts.runtimeClasses[n] = h; i++; }
  else if (a === '--docker') { opts.docker = v; i++; }
  else if (a === '--require-runtime-class') { opts.requireRuntimeClass = v; i++; }
  else if (a === '--runsc-pids-headroom') { opts.runscPidsHeadroom = +v; i++; }
  // A CNI that never applies a policy's deletion (slow, or broken): the tests use it to show
  // that the egress proxy refuses on its own once locked (defence in depth).
  else if (a === '--cni-ignores-policy-deletes') { opts.ignorePolicyDeletes = true; }
  else if (a === '--kubelet-delay-ms') { opts.kubeletDelayMs = +v; i++; }
  // An admission policy that refuses every exec with 400 and this message (a cluster that
  // forbids exec into box pods, or a webhook that chose 400).
  else if (a === '--deny-exec') { opts.denyExec = v; i++; }
  else { console.error(`k8s_stub: unknown option ${a}`); process.exit(2); }
}
const DOCKER = opts.docker || 'docker';

// The Role's rules: [{resources, verbs, apiGroups}].
let rules = null;
if (opts.role) {
  for (const doc of yaml.loadAll(fs.readFileSync(opts.role, 'utf8'))) {
    if (doc && doc.kind === 'Role') rules = doc.rules || [];
  }
  if (!rules) { console.error(`k8s_stub: no Role in ${opts.role}`); process.exit(2); }
}

// --- state -----------------------------------------------------------------------------

const pods = new Map();     // name -> {obj, containers: [{name, docker}], volumes: [...], ...}
const policies = new Map(); // name -> obj
// Pod records whose Docker containers exist (a pod deleted with grace 0 stays here until the
// "kubelet" has removed them, though the API no longer has the object).
const live = new Set();
// What GET /stub/report answers.
const report = { warnings: [], unvalidated: [], overlaps: [], upgrades: [] };
let models = null; // @kubernetes/client-node, loaded before listening
const log = (...a) => { if (process.env.K8S_STUB_DEBUG) console.error('k8s_stub:', ...a); };

function now() { return new Date().toISOString().replace(/\.\d+Z$/, 'Z'); }

function status(code, reason, message, details) {
  const s = { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, code };
  if (details) s.details = details;
  return s;
}

function send(res, code, obj) {
  const body = JSON.stringify(obj);
  res.writeHead(code, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) });
  res.end(body);
}

function docker(args, input) {
  return new Promise((resolve) => {
    const p = execFile(DOCKER, args, { maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr });
    });
    if (input !== undefined) p.stdin.end(input);
  });
}

// --- validation ------------------------------------------------------------------------

const DNS1123 = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
const LABEL_KEY = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;

// Schema errors (kubernetes-models' validator) and the API server's own field checks, as the
// causes of a 422 Invalid.
function invalid(kind, name, causes) {
  const msg = `${kind} "${name}" is invalid: ` + causes.map(c => `${c.field}: ${c.message}`).join(', ');
  return status(422, 'Invalid', msg, { name, kind: kind.toLowerCase() + 's', causes: causes.map(c => ({ reason: 'FieldValueInvalid', message: c.message, field: c.field })) });
}

function schemaCauses(Model, obj) {
  try {
    new Model(obj).validate();
    return [];
  } catch (e) {
    const errs = e.errors || e.details || [{ instancePath: '', message: e.message }];
    return errs.map(x => ({ field: (x.instancePath || '').replace(/^\//, '').replace(/\//g, '.'), message: x.message || String(x) }));
  }
}

function metaCauses(obj) {
  const c = [];
  const md = obj.metadata || {};
  if (!md.name || md.name.length > 253 || !DNS1123.test(md.name)) c.push({ field: 'metadata.name', message: `Invalid value: "${md.name}": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.'` });
  for (const [k, v] of Object.entries(md.labels || {})) {
    if (k.length > 316 || !LABEL_KEY.test(k)) c.push({ field: `metadata.labels`, message: `Invalid value: "${k}": name part must consist of alphanumeric characters, '-', '_' or '.'` });
    if (typeof v !== 'string' || v.length > 63 || !LABEL_VALUE.test(v)) c.push({ field: `metadata.labels`, message: `Invalid value: "${v}": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.'` });
  }
  if (md.namespace && md.namespace !== opts.namespace) c.push({ field: 'metadata.namespace', message: `Invalid value: "${md.namespace}": does not match the namespace of the request` });
  return c;
}

const QUANTITY = /^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$/;
function quantity(q) {
  if (q === undefined) return undefined;
  const s = String(q), m = QUANTITY.exec(s);
  if (!m) return NaN;
  const mult = { '': 1, m: 1e-3, k: 1e3, M: 1e6, G: 1e9, T: 1e12, Ki: 1024, Mi: 1 << 20, Gi: 1 << 30, Ti: 2 ** 40 }[m[2]];
  return mult === undefined ? NaN : parseFloat(m[1]) * mult;
}

// Unknown fields of v against the official type (a client-node model name, or
// Array<T> / { [key: string]: T; }), as the API server's decoder names them
// ("spec.containers[0].foo"); with prune they are removed from v, as the server drops them.
function unknownFields(v, type, path, out, prune) {
  if (v === null || typeof v !== 'object') return out;
  let m;
  if ((m = /^Array<(.+)>$/.exec(type))) {
    if (Array.isArray(v)) v.forEach((x, i) => unknownFields(x, m[1], `${path}[${i}]`, out, prune));
    return out;
  }
  if ((m = /^\{ \[key: string\]: (.+); \}$/.exec(type))) {
    for (const [k, x] of Object.entries(v)) unknownFields(x, m[1], `${path}[${k}]`, out, prune);
    return out;
  }
  const M = models[type];
  if (!M || typeof M.getAttributeTypeMap !== 'function' || Array.isArray(v)) return out;
  const known = new Map(M.getAttributeTypeMap().map(a => [a.baseName, a.type]));
  for (const k of Object.keys(v)) {
    const p = path ? `${path}.${k}` : k;
    if (!known.has(k)) { out.push(p); if (prune) delete v[k]; }
    else unknownFields(v[k], known.get(k), p, out, prune);
  }
  return out;
}

// fieldValidation of a write: null when the object may go on (unknown fields dropped, with a
// Warning header each under Warn), or the Status to answer with.
function fieldValidation(req, res, r, obj) {
  const mode = r.url.searchParams.get('fieldValidation') || 'Warn';
  if (!['Strict', 'Warn', 'Ignore'].includes(mode)) return status(400, 'BadRequest', `fieldValidation parameter unsupported: ${mode}`);
  if (mode !== 'Strict' && /^autopatch/.test(req.headers['user-agent'] || '')) report.unvalidated.push({ method: req.method, path: r.url.pathname + r.url.search });
  const unknown = unknownFields(obj, r.kind === 'Pod' ? 'V1Pod' : 'V1NetworkPolicy', '', [], mode !== 'Strict');
  if (!unknown.length || mode === 'Ignore') return null;
  if (mode === 'Strict') return status(400, 'BadRequest', `${r.kind} in version "v1" cannot be handled as a ${r.kind}: strict decoding error: ${unknown.map(f => `unknown field "${f}"`).join(', ')}`);
  const warnings = unknown.map(f => `299 - "unknown field \\"${f}\\""`);
  for (const w of warnings) report.warnings.push({ path: r.url.pathname, warning: w });
  res.setHeader('Warning', warnings);
  return null;
}

function podCauses(pod) {
  const c = [];
  const spec = pod.spec || {};
  const names = new Set();
  const vols = new Set((spec.volumes || []).map(v => v.name));
  if (spec.restartPolicy && !['Always', 'OnFailure', 'Never'].includes(spec.restartPolicy)) c.push({ field: 'spec.restartPolicy', message: 'Unsupported value' });
  for (const [i, ct] of (spec.containers || []).entries()) {
    if (names.has(ct.name)) c.push({ field: `spec.containers[${i}].name`, message: `Duplicate value: "${ct.name}"` });
    names.add(ct.name);
    if (!DNS1123.test(ct.name || '') || ct.name.includes('.')) c.push({ field: `spec.containers[${i}].name`, message: 'Invalid value: a lowercase RFC 1123 label' });
    for (const m of ct.volumeMounts || []) if (!vols.has(m.name)) c.push({ field: `spec.containers[${i}].volumeMounts.name`, message: `Not found: "${m.name}"` });
    for (const [k, v] of Object.entries((ct.resources || {}).limits || {})) if (Number.isNaN(quantity(v))) c.push({ field: `spec.containers[${i}].resources.limits[${k}]`, message: `Invalid value: "${v}": quantities must match the regular expression` });
  }
  for (const [i, v] of (spec.volumes || []).entries()) {
    if (v.emptyDir && v.emptyDir.sizeLimit !== undefined && Number.isNaN(quantity(v.emptyDir.sizeLimit))) c.push({ field: `spec.volumes[${i}].emptyDir.sizeLimit`, message: 'Invalid value' });
  }
  if (spec.activeDeadlineSeconds !== undefined && !(spec.activeDeadlineSeconds > 0)) c.push({ field: 'spec.activeDeadlineSeconds', message: 'Invalid value: must be between 1 and 2147483647, inclusive' });
  return c;
}

// The "restricted" Pod Security Standard, as enforced by PodSecurity admission on a namespace
// labelled pod-security.kubernetes.io/enforce=restricted: the reasons it would be forbidden.
function restrictedViolations(pod) {
  const v = [];
  const spec = pod.spec || {}, psc = spec.securityContext || {};
  if (spec.hostNetwork || spec.hostPID || spec.hostIPC) v.push('host namespaces (hostNetwork=true, hostPID=true or hostIPC=true)');
  const allowedVol = ['configMap', 'csi', 'downwardAPI', 'emptyDir', 'ephemeral', 'persistentVolumeClaim', 'projected', 'secret'];
  for (const vol of spec.volumes || []) {
    const kinds = Object.keys(vol).filter(k => k !== 'name');
    if (kinds.some(k => !allowedVol.includes(k))) v.push(`restricted volume types (volume "${vol.name}" uses ${kinds.join(',')})`);
  }
  const all = [...(spec.initContainers || []), ...(spec.containers || [])];
  for (const ct of all) {
    const sc = ct.securityContext || {};
    if (sc.privileged) v.push(`privileged (container "${ct.name}" must not set securityContext.privileged=true)`);
    if (sc.allowPrivilegeEscalation !== false) v.push(`allowPrivilegeEscalation != false (container "${ct.name}" must set securityContext.allowPrivilegeEscalation=false)`);
    const drop = ((sc.capabilities || {}).drop || []);
    if (!drop.includes('ALL')) v.push(`unrestricted capabilities (container "${ct.name}" must set securityContext.capabilities.drop=["ALL"])`);
    if (((sc.capabilities || {}).add || []).some(c => c !== 'NET_BIND_SERVICE')) v.push(`unrestricted capabilities (container "${ct.name}" must not include capabilities.add)`);
    const nonRoot = sc.runAsNonRoot !== undefined ? sc.runAsNonRoot : psc.runAsNonRoot;
    if (nonRoot !== true) v.push(`runAsNonRoot != true (container "${ct.name}" must set securityContext.runAsNonRoot=true)`);
    const uid = sc.runAsUser !== undefined ? sc.runAsUser : psc.runAsUser;
    if (uid === 0) v.push(`runAsUser=0 (container "${ct.name}" must not set runAsUser=0)`);
    const sp = (sc.seccompProfile || psc.seccompProfile || {}).type;
    if (sp !== 'RuntimeDefault' && sp !== 'Localhost') v.push(`seccompProfile (container "${ct.name}" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")`);
    for (const p of ct.ports || []) if (p.hostPort) v.push(`hostPort (container "${ct.name}" uses hostPort ${p.hostPort})`);
  }
  return [...new Set(v)];
}

// What issue 15 asks of every box pod beyond the restricted standard, checked the way a
// cluster operator's admission policy would (a ValidatingAdmissionPolicy or webhook named
// "autopatch-box-hardening") for each pod labelled autopatch.owner: the reasons it is refused.
function boxViolations(pod) {
  const v = [];
  const spec = pod.spec || {}, psc = spec.securityContext || {};
  const labels = (pod.metadata || {}).labels || {};
  const name = (pod.metadata || {}).name;
  if (spec.automountServiceAccountToken !== false) v.push('spec.automountServiceAccountToken must be false');
  if (spec.enableServiceLinks !== false) v.push('spec.enableServiceLinks must be false');
  if (spec.shareProcessNamespace) v.push('spec.shareProcessNamespace must not be true');
  if (spec.restartPolicy !== 'Never') v.push('spec.restartPolicy must be Never');
  if (labels['autopatch.job'] !== 'pool' && !(spec.activeDeadlineSeconds > 0)) v.push('spec.activeDeadlineSeconds (the wall limit) must be set');
  if (opts.requireRuntimeClass && spec.runtimeClassName !== opts.requireRuntimeClass) v.push(`spec.runtimeClassName must be "${opts.requireRuntimeClass}" (got ${spec.runtimeClassName ? `"${spec.runtimeClassName}"` : 'none'})`);
  for (const vol of spec.volumes || []) {
    const ed = vol.emptyDir;
    if (!ed || ed.medium !== 'Memory' || !ed.sizeLimit) v.push(`volume "${vol.name}" must be an emptyDir with medium Memory and a sizeLimit`);
  }
  if ((spec.initContainers || []).length || (spec.ephemeralContainers || []).length) v.push('no init or ephemeral containers');
  for (const ct of spec.containers || []) {
    const sc = ct.securityContext || {};
    const uid = sc.runAsUser !== undefined ? sc.runAsUser : psc.runAsUser;
    const gid = sc.runAsGroup !== undefined ? sc.runAsGroup : psc.runAsGroup;
    if (uid !== 10001 || gid !== 10001) v.push(`container "${ct.name}" must run as 10001:10001`);
    if (sc.readOnlyRootFilesystem !== true) v.push(`container "${ct.name}" must set securityContext.readOnlyRootFilesystem=true`);
    if (sc.privileged !== false) v.push(`container "${ct.name}" must set securityContext.privileged=false`);
    if (ct.stdin || ct.tty) v.push(`container "${ct.name}" must not keep stdin or a tty open`);
    if ((ct.envFrom || []).length || (ct.env || []).some(e => e.valueFrom)) v.push(`container "${ct.name}" must take no environment from secrets, config maps or fields`);
    const res = ct.resources || {}, lim = res.limits || {}, reqs = res.requests || {};
    for (const k of ['cpu', 'memory', 'ephemeral-storage']) {
      if (lim[k] === undefined) v.push(`container "${ct.name}" must set resources.limits.${k}`);
      else if (reqs[k] !== undefined && quantity(reqs[k]) !== quantity(lim[k])) v.push(`container "${ct.name}" must request what it is limited to (${k})`);
    }
  }
  if (!egressDenied(labels)) v.push(`a NetworkPolicy denying all egress must select the pod before it is created (none selects autopatch.box=${labels['autopatch.box'] || name})`);
  return [...new Set(v)];
}

// --- RBAC + authentication -------------------------------------------------------------

function allowed(verb, resource, group) {
  if (!rules) return true;
  return rules.some(r => (r.apiGroups || ['']).includes(group) && (r.resources || []).includes(resource) && ((r.verbs || []).includes(verb) || (r.verbs || []).includes('*')));
}

function authenticated(req) {
  const h = req.headers.authorization || '';
  if (opts.token && h === `Bearer ${opts.token}`) return 'token';
  const cert = req.socket.getPeerCertificate && req.socket.getPeerCertificate();
  if (req.client.authorized && cert && cert.subject) return 'cert:' + cert.subject.CN;
  return null;
}

// --- pods as containers ----------------------------------------------------------------

function selects(selector, labels) {
  const ml = (selector || {}).matchLabels || {};
  for (const [k, v] of Object.entries(ml)) if ((labels || {})[k] !== v) return false;
  for (const e of (selector || {}).matchExpressions || []) {
    const has = Object.prototype.hasOwnProperty.call(labels || {}, e.key);
    if (e.operator === 'In' && !(has && e.values.includes(labels[e.key]))) return false;
    if (e.operator === 'NotIn' && has && e.values.includes(labels[e.key])) return false;
    if (e.operator === 'Exists' && !has) return false;
    if (e.operator === 'DoesNotExist' && has) return false;
  }
  return true;
}

// Whether a NetworkPolicy isolates the pod's egress with nothing allowed (the only policy the
// stand-in's "CNI" can enforce with Docker: network none).
function egressDenied(labels) {
  for (const rec of policies.values()) {
    const s = rec.obj.spec || {};
    const types = s.policyTypes || (s.egress ? ['Ingress', 'Egress'] : ['Ingress']);
    if (types.includes('Egress') && selects(s.podSelector, labels) && !(s.egress || []).length) return true;
  }
  return false;
}

// Whether a NetworkPolicy the API holds denies the pod all ingress and egress (types both, no
// rule in either).
function denyAll(labels) {
  for (const rec of policies.values()) {
    const s = rec.obj.spec || {};
    const types = s.policyTypes || [];
    if (types.includes('Egress') && types.includes('Ingress') && selects(s.podSelector, labels) &&
        !(s.egress || []).length && !(s.ingress || []).length) return true;
  }
  return false;
}

// After a policy went: every box pod whose containers still exist must still be covered by a
// deny-all policy; a moment without is recorded (a real cluster would let it talk).
async function checkCoverage(policy) {
  const at = new Date().toISOString();
  for (const rec of [...live]) {
    const labels = rec.obj.metadata.labels || {};
    if (labels['autopatch.owner'] === undefined || denyAll(labels)) continue;
    const r = await docker(['inspect', '-f', '{{.State.Running}}', ...rec.containers.map(c => c.docker)]);
    if (!r.stdout.split('\n').includes('true')) continue;
    report.overlaps.push({ pod: rec.obj.metadata.name, policy, at, objectGone: pods.get(rec.obj.metadata.name) !== rec });
  }
}

// The egress a pod's policies allow, as the CNI would enforce it: { selected, allow: [{cidr,
// port}] } (selected: some policy isolates the pod's egress; cidr null: any destination; port
// null: any port). Peers the stand-in cannot map (podSelector, namespaceSelector, an ipBlock
// with except) allow nothing: fail closed.
// --cni-ignores-policy-deletes: the policies the API deleted that the "CNI" never heard of. They
// stay in force for every later rewrite of a chain (a new pod's policy re-enforces all pods),
// as they would on a CNI that missed the delete.
const ghostPolicies = new Map();

function egressAllowed(labels) {
  const out = { selected: false, allow: [] };
  for (const rec of [...policies.values(), ...ghostPolicies.values()]) {
    const s = rec.obj.spec || {};
    const types = s.policyTypes || (s.egress ? ['Ingress', 'Egress'] : ['Ingress']);
    if (!types.includes('Egress') || !selects(s.podSelector, labels)) continue;
    out.selected = true;
    for (const rule of s.egress || []) {
      const ports = (rule.ports || [{}]).filter(p => (p.protocol || 'TCP') === 'TCP' && !p.endPort && (p.port === undefined || typeof p.port === 'number'));
      const peers = rule.to === undefined ? [{ cidr: null }] : rule.to.map(peer => (peer.ipBlock && !(peer.ipBlock.except || []).length && !peer.podSelector && !peer.namespaceSelector ? { cidr: peer.ipBlock.cidr } : null)).filter(Boolean);
      for (const peer of peers) for (const port of ports) out.allow.push({ cidr: peer.cidr, port: port.port === undefined ? null : port.port });
    }
  }
  return out;
}

// --- the "CNI": iptables chains for pods whose egress is allowed somewhere ----------------

let chainSeq = 0;
function run(cmd, args) {
  return new Promise((resolve) => {
    execFile(cmd, args, (err, stdout, stderr) => resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr }));
  });
}
async function ipt(args, v6) {
  const r = await run(v6 ? 'ip6tables' : 'iptables', ['-w', ...args]);
  if (r.code) throw new Error(`${v6 ? 'ip6tables' : 'iptables'} ${args.join(' ')}: ${(r.stderr || '').trim()}`);
}
// Make the chain say exactly what the pod's policies allow now.
async function writeChain(net, labels) {
  const { allow } = egressAllowed(labels);
  await ipt(['-F', net.chain]);
  for (const a of allow) {
    const args = ['-A', net.chain];
    if (a.cidr) args.push('-d', a.cidr);
    if (a.port !== null) args.push('-p', 'tcp', '--dport', String(a.port));
    if (a.cidr && a.cidr.includes(':')) continue; // an IPv6 block: the pod has no IPv6 here
    await ipt([...args, '-j', 'ACCEPT']);
  }
  await ipt(['-A', net.chain, '-j', 'DROP']);
  net.allow = allow;
  log('egress of', labels['autopatch.box'], JSON.stringify(allow));
}
async function policedNetwork(name, labels, rec) {
  const n = ++chainSeq;
  const net = rec.net = { name: `k8sstub-${name}`, bridge: `ks${process.pid % 100000}-${n}`.slice(0, 15), chain: `KS${process.pid}-${n}`, installed: [] };
  const r = await docker(['network', 'create', '--internal', '--label', `k8sstub.pod=${name}`, '--label', `k8sstub.owner=${process.pid}`, '-o', `com.docker.network.bridge.name=${net.bridge}`, net.name]);
  if (r.code) throw new Error(`network: ${r.stderr.trim()}`);
  net.created = true;
  await ipt(['-N', net.chain]);
  net.installed.push(['-X', net.chain]);
  await writeChain(net, labels);
  await ipt(['-I', 'INPUT', '1', '-i', net.bridge, '-j', net.chain]);
  net.installed.push(['-D', 'INPUT', '-i', net.bridge, '-j', net.chain]);
  const r6 = await run('ip6tables', ['-w', '-I', 'INPUT', '1', '-i', net.bridge, '-j', 'DROP']);
  if (!r6.code) net.v6 = true;
  return net;
}
async function removeNetwork(net) {
  if (net.v6) await run('ip6tables', ['-w', '-D', 'INPUT', '-i', net.bridge, '-j', 'DROP']);
  for (const args of net.installed.slice().reverse()) {
    if (args[0] === '-X') await run('iptables', ['-w', '-F', net.chain]);
    await run('iptables', ['-w', ...args]);
  }
  if (net.created) await docker(['network', 'rm', net.name]);
}
// A policy came or went: every pod on a policed network gets its chain rewritten before the
// API answers, as a CNI would (soon) after.
async function reenforce() {
  for (const rec of pods.values()) {
    if (rec.net && !rec.deleted) await writeChain(rec.net, rec.obj.metadata.labels);
  }
}

function labelSelectorMatches(sel, labels) {
  if (!sel) return true;
  for (const term of sel.split(',')) {
    const m = /^([^=!]+)(==|=|!=)(.*)$/.exec(term.trim());
    if (!m) return false;
    const v = (labels || {})[m[1]];
    if (m[2] === '!=' ? v === m[3] : v !== m[3]) return false;
  }
  return true;
}

async function startPod(pod, rec) {
  const spec = pod.spec, psc = spec.securityContext || {};
  const name = pod.metadata.name;
  const eg = egressAllowed(pod.metadata.labels);
  const deny = eg.selected && !eg.allow.length;
  const runtime = spec.runtimeClassName ? opts.runtimeClasses[spec.runtimeClassName] : null;
  try {
    for (const v of spec.volumes || []) {
      if (!v.emptyDir) continue;
      const vname = `k8sstub-${name}-${v.name}`;
      const o = ['mode=0777'];
      const size = quantity(v.emptyDir.sizeLimit);
      if (size) o.push(`size=${Math.floor(size)}`);
      if (psc.fsGroup !== undefined) o.push(`gid=${psc.fsGroup}`, 'mode=2777');
      const oo = o.filter(x => !(x === 'mode=0777' && psc.fsGroup !== undefined));
      // medium Memory is a tmpfs; a disk-backed emptyDir is a tmpfs too here (no node disk).
      const r = await docker(['volume', 'create', '--label', `k8sstub.pod=${name}`, '--driver', 'local', '--opt', 'type=tmpfs', '--opt', 'device=tmpfs', '--opt', `o=${oo.join(',')}`, vname]);
      if (r.code) throw new Error(`volume ${v.name}: ${r.stderr.trim()}`);
      rec.volumes.push(vname);
    }
    if (eg.allow.length) await policedNetwork(name, pod.metadata.labels, rec);
    const network = rec.net ? rec.net.name : deny ? 'none' : 'bridge';
    let first = null;
    for (const ct of spec.containers) {
      const sc = ct.securityContext || {};
      const uid = sc.runAsUser !== undefined ? sc.runAsUser : psc.runAsUser;
      const gid = sc.runAsGroup !== undefined ? sc.runAsGroup : psc.runAsGroup;
      const dname = `k8sstub-${name}-${ct.name}`;
      const args = ['create', '--pull', 'never', '--name', dname, '--label', `k8sstub.pod=${name}`, '--label', `k8sstub.owner=${process.pid}`, '--log-driver', 'json-file'];
      if (uid !== undefined) args.push('--user', gid !== undefined ? `${uid}:${gid}` : `${uid}`);
      if (psc.fsGroup !== undefined) args.push('--group-add', String(psc.fsGroup));
      for (const g of psc.supplementalGroups || []) args.push('--group-add', String(g));
      if (sc.readOnlyRootFilesystem) args.push('--read-only');
      for (const c of (sc.capabilities || {}).drop || []) args.push('--cap-drop', c);
      for (const c of (sc.capabilities || {}).add || []) args.push('--cap-add', c);
      if (sc.allowPrivilegeEscalation === false) args.push('--security-opt', 'no-new-privileges:true');
      if (sc.privileged) args.push('--privileged');
      // RuntimeDefault is the runtime's default profile: Docker's. Unconfined would be:
      const sp = (sc.seccompProfile || psc.seccompProfile || {}).type;
      if (sp === 'Unconfined') args.push('--security-opt', 'seccomp=unconfined');
      const lim = (ct.resources || {}).limits || {};
      if (lim.memory) args.push('--memory', String(Math.floor(quantity(lim.memory))), '--memory-swap', String(Math.floor(quantity(lim.memory))));
      if (lim.cpu) args.push('--cpus', String(quantity(lim.cpu)));
      // The kubelet's podPidsLimit. Under runsc the container's pids cgroup holds gVisor's
      // own host threads (Sentry, gofer) and none of the sandboxed processes (the Sentry does
      // not enforce PidsLimit, docs/sandbox.md): 64 kills the sandbox at its first busy exec,
      // so those threads get room of their own (a real node needs it in podPidsLimit too).
      args.push('--pids-limit', String(opts.podPidsLimit + (runtime === 'runsc' ? opts.runscPidsHeadroom : 0)));
      if (runtime) args.push('--runtime', runtime);
      // A pod's containers share its network and IPC namespaces; under runsc each Docker
      // container is a sandbox of its own and cannot join another's, so there each gets its
      // own (the same policy applies to both).
      if (!first || runtime === 'runsc') {
        args.push('--network', network, '--hostname', name);
        if (runtime !== 'runsc') args.push('--ipc', 'shareable');
      } else {
        args.push('--network', `container:${first}`, '--ipc', `container:${first}`);
      }
      for (const e of ct.env || []) args.push('-e', `${e.name}=${e.value || ''}`);
      for (const m of ct.volumeMounts || []) {
        args.push('--mount', `type=volume,src=k8sstub-${name}-${m.name},dst=${m.mountPath},volume-nocopy${m.readOnly ? ',readonly' : ''}`);
      }
      if (ct.workingDir) args.push('-w', ct.workingDir);
      const cmd = [...(ct.command || []), ...(ct.args || [])];
      if (ct.command && ct.command.length) args.push('--entrypoint', ct.command[0]);
      args.push(ct.image);
      if (ct.command && ct.command.length) args.push(...ct.command.slice(1), ...(ct.args || []));
      else args.push(...cmd);
      const r = await docker(args);
      if (r.code) throw new Error(`container ${ct.name}: ${r.stderr.trim()}`);
      rec.containers.push({ name: ct.name, docker: dname });
      live.add(rec);
      const s = await docker(['start', dname]);
      if (s.code) throw new Error(`container ${ct.name}: ${s.stderr.trim()}`);
      if (!first) first = dname;
    }
    if (rec.deleted) return;
    let podIP = deny ? undefined : '10.0.0.1';
    if (rec.net) {
      const r = await docker(['inspect', '-f', `{{(index .NetworkSettings.Networks "${rec.net.name}").IPAddress}}`, first]);
      podIP = r.stdout.trim();
      if (r.code || !podIP) throw new Error(`no address on ${rec.net.name}: ${r.stderr.trim()}`);
    }
    pod.status = { phase: 'Running', startTime: now(), podIP,
      conditions: [{ type: 'Ready', status: 'True', lastTransitionTime: now() }],
      containerStatuses: spec.containers.map(c => ({ name: c.name, ready: true, restartCount: 0, image: c.image, imageID: '', started: true, state: { running: { startedAt: now() } } })) };
    if (spec.activeDeadlineSeconds) {
      rec.timer = setTimeout(() => killPod(rec, 'DeadlineExceeded', `Pod was active on the node longer than the specified deadline`), spec.activeDeadlineSeconds * 1000);
    }
  } catch (e) {
    log('start failed', name, e.message);
    pod.status = { phase: 'Failed', reason: 'CreateContainerError', message: e.message, conditions: [{ type: 'Ready', status: 'False' }] };
    if (/No such image|not found|pull access denied/i.test(e.message)) {
      // The stand-in never pulls: a missing image reads as the kubelet would report it.
      const waiting = (c) => (c.imagePullPolicy === 'Never'
        ? { reason: 'ErrImageNeverPull', message: `Container image "${c.image}" is not present with pull policy of Never` }
        : { reason: 'ErrImagePull', message: `Failed to pull image "${c.image}": rpc error: code = NotFound desc = failed to pull and unpack image "${c.image}": not found` });
      pod.status = { phase: 'Pending', conditions: [{ type: 'Ready', status: 'False' }], containerStatuses: spec.containers.map(c => ({ name: c.name, ready: false, restartCount: 0, image: c.image, imageID: '', state: { waiting: waiting(c) } })) };
    }
  }
}

async function killPod(rec, reason, message) {
  const ids = rec.containers.map(c => c.docker);
  if (ids.length) await docker(['kill', ...ids]);
  rec.obj.status = Object.assign({}, rec.obj.status, { phase: 'Failed', reason, message });
}

async function removePod(rec) {
  if (rec.removing) return rec.removing;
  rec.removing = (async () => {
    rec.deleted = true;
    if (rec.timer) clearTimeout(rec.timer);
    await rec.started;
    const ids = rec.containers.map(c => c.docker);
    if (ids.length) await docker(['rm', '-f', '-v', ...ids]);
    live.delete(rec);
    if (rec.volumes.length) await docker(['volume', 'rm', '-f', ...rec.volumes]);
    if (rec.net) await removeNetwork(rec.net);
  })();
  return rec.removing;
}

const sleep = (ms) => new Promise(r => setTimeout(r, ms));

// The kubelet's part of a pod deletion: it notices after --kubelet-delay-ms, sends SIGTERM,
// SIGKILL after the grace period, removes the containers; then the object goes (a graceful
// delete) or is long gone (grace 0).
async function kubeletStop(rec, grace) {
  await sleep(opts.kubeletDelayMs);
  await rec.started;
  const ids = rec.containers.map(c => c.docker);
  if (ids.length && grace > 0) await docker(['stop', '-t', String(grace), ...ids]);
  await removePod(rec);
  const name = rec.obj.metadata.name;
  if (pods.get(name) === rec) pods.delete(name);
}

// DELETE of a pod: the grace period the API server settles on (DeleteOptions in the query or
// the body, else the pod's terminationGracePeriodSeconds, else 30; 0 for a pod that is not
// running), then either the object goes now and the containers later, or the object stays
// (deletionTimestamp) until the containers are gone.
function deletePod(r, rec, body) {
  const q = r.url.searchParams.get('gracePeriodSeconds');
  let grace = q !== null ? +q : body && body.gracePeriodSeconds !== undefined ? +body.gracePeriodSeconds
    : rec.obj.spec.terminationGracePeriodSeconds !== undefined ? rec.obj.spec.terminationGracePeriodSeconds : 30;
  const phase = (rec.obj.status || {}).phase;
  const md = rec.obj.metadata;
  if (phase === 'Failed' || phase === 'Succeeded') {
    // Its containers stopped already: the object goes, the dead containers with it.
    pods.delete(md.name);
    md.deletionTimestamp = md.deletionTimestamp || now();
    md.deletionGracePeriodSeconds = 0;
    return removePod(rec);
  }
  if (grace < 0) grace = 1;
  if (grace === 0) {
    pods.delete(md.name);
    md.deletionTimestamp = md.deletionTimestamp || now();
    md.deletionGracePeriodSeconds = 0;
    if (!rec.stopping) rec.stopping = kubeletStop(rec, 0);
    return;
  }
  if (md.deletionTimestamp) return; // already terminating: a second DELETE changes nothing here
  md.deletionTimestamp = new Date(Date.now() + grace * 1000).toISOString().replace(/\.\d+Z$/, 'Z');
  md.deletionGracePeriodSeconds = grace;
  rec.stopping = kubeletStop(rec, grace);
}

// The pod's live status: its containers' Docker state (a box that died under a command,
// e.g. gVisor's Sentry OOM-killed, is seen here).
async function refresh(rec) {
  const pod = rec.obj;
  if (!pod.status || pod.status.phase !== 'Running' || !rec.containers.length) return;
  const r = await docker(['inspect', '-f', '{{.State.Running}} {{.State.ExitCode}} {{.State.OOMKilled}}', ...rec.containers.map(c => c.docker)]);
  if (r.code) return;
  const states = r.stdout.trim().split('\n').map(l => l.split(' '));
  if (states.some(s => s[0] !== 'true')) {
    // As the kubelet (restartPolicy Never): the pod fails once every container has
    // terminated; until then it is Running with the dead container's status terminated.
    if (states.every(s => s[0] !== 'true')) pod.status.phase = 'Failed';
    pod.status.containerStatuses = rec.containers.map((c, i) => ({ name: c.name, ready: false, restartCount: 0, image: '', imageID: '',
      state: states[i][0] === 'true' ? { running: { startedAt: now() } } : { terminated: { exitCode: +states[i][1], reason: states[i][2] === 'true' ? 'OOMKilled' : 'Error' } } }));
  }
}

// --- exec over WebSocket ---------------------------------------------------------------

const wss = new WebSocketServer({ noServer: true, perMessageDeflate: false,
  handleProtocols: (offered) => { for (const p of opts.protocols) if (offered.has(p)) return p; return false; } });

function execSocket(ws, rec, query) {
  const v5 = ws.protocol === 'v5.channel.k8s.io';
  const command = query.getAll('command');
  const container = query.get('container') || rec.obj.spec.containers[0].name;
  const ct = rec.containers.find(c => c.name === container);
  const wantIn = query.get('stdin') === 'true' || query.get('stdin') === '1';
  const chan = (n, data) => { if (ws.readyState === 1) ws.send(Buffer.concat([Buffer.from([n]), Buffer.from(data)])); };
  const finish = (st) => { chan(3, JSON.stringify(st)); ws.close(1000); };
  if (!ct) return finish(status(400, 'BadRequest', `container ${container} is not valid for pod ${rec.obj.metadata.name}`));
  const args = ['exec', ...(wantIn ? ['-i'] : []), ct.docker, ...command];
  log('exec', ws.protocol, command.join(' '));
  const child = spawn(DOCKER, args, { stdio: [wantIn ? 'pipe' : 'ignore', 'pipe', 'pipe'] });
  child.stdout.on('data', d => chan(1, d));
  child.stderr.on('data', d => chan(2, d));
  if (wantIn) child.stdin.on('error', () => {});
  ws.on('message', (msg, isBinary) => {
    const b = Buffer.from(msg);
    if (!b.length) return;
    if (b[0] === 0 && wantIn) child.stdin.write(b.subarray(1));
    else if (b[0] === 255 && v5 && b[1] === 0 && wantIn) child.stdin.end();
  });
  ws.on('close', () => { if (child.exitCode === null) child.kill('SIGKILL'); });
  child.on('close', (code, signal) => {
    if (code === 0) return finish({ metadata: {}, status: 'Success' });
    const ec = code === null ? 128 + 9 : code;
    finish({ metadata: {}, status: 'Failure', message: `command terminated with non-zero exit code: error executing command [${command.join(' ')}], exit code ${ec}`, reason: 'NonZeroExitCode', details: { causes: [{ reason: 'ExitCode', message: String(ec) }] } });
  });
}

// --- routing ---------------------------------------------------------------------------

const POD_RE = /^\/api\/v1\/namespaces\/([^/]+)\/pods(?:\/([^/]+)(?:\/(exec|log))?)?$/;
const NP_RE = /^\/apis\/networking\.k8s\.io\/v1\/namespaces\/([^/]+)\/networkpolicies(?:\/([^/]+))?$/;

function route(req) {
  const url = new URL(req.url, 'https://stub');
  let m = POD_RE.exec(url.pathname);
  if (m) return { url, ns: m[1], name: m[2], sub: m[3], resource: m[3] ? `pods/${m[3]}` : 'pods', group: '', kind: 'Pod' };
  m = NP_RE.exec(url.pathname);
  if (m) return { url, ns: m[1], name: m[2], resource: 'networkpolicies', group: 'networking.k8s.io', kind: 'NetworkPolicy' };
  return { url };
}

// Why an exec into the pod is refused (a Status), or {code: 200}: the API server resolves the
// pod and container before it looks at the upgrade.
function execRefusal(r) {
  const rec = pods.get(r.name);
  if (!rec) return status(404, 'NotFound', `pods "${r.name}" not found`, { name: r.name, kind: 'pods' });
  if (opts.denyExec) return status(400, 'BadRequest', `admission webhook "exec-guard" denied the request: ${opts.denyExec}`);
  const phase = (rec.obj.status || {}).phase;
  if (phase === 'Failed' || phase === 'Succeeded') return status(400, 'BadRequest', `cannot exec into a container in a completed pod; current phase is ${phase}`);
  if (phase !== 'Running') return status(400, 'BadRequest', `pod ${r.name} does not have a host assigned`);
  const container = r.url.searchParams.get('container');
  if (container && !rec.obj.spec.containers.some(c => c.name === container)) return status(400, 'BadRequest', `container ${container} is not valid for pod ${r.name}`);
  return { code: 200 };
}

function verbOf(method, r) {
  if (r.sub === 'exec') return method === 'GET' ? 'get' : 'create';
  if (method === 'POST') return 'create';
  if (method === 'DELETE') return 'delete';
  if (method === 'GET') return r.name ? 'get' : (r.url.searchParams.get('watch') ? 'watch' : 'list');
  return method.toLowerCase();
}

// Authentication, authorization, namespace: a Status to answer with, or null.
function gate(req, r, verb) {
  const who = authenticated(req);
  if (!who) return status(401, 'Unauthorized', 'Unauthorized');
  if (!r.resource) return status(404, 'NotFound', 'the server could not find the requested resource');
  const user = who === 'token' ? 'system:serviceaccount:autopatch:autopatch' : who.slice(5);
  if (!allowed(verb, r.resource, r.group)) {
    const [res, sub] = r.resource.split('/');
    return status(403, 'Forbidden', `${r.kind === 'Pod' ? res : res}${r.name ? ` "${r.name}"` : ''} is forbidden: User "${user}" cannot ${verb} resource "${r.resource}" in API group "${r.group}" in the namespace "${r.ns}"`, { name: r.name, group: r.group, kind: sub ? r.resource : res });
  }
  if (r.ns !== opts.namespace) return status(404, 'NotFound', `namespaces "${r.ns}" not found`, { name: r.ns, kind: 'namespaces' });
  return null;
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = []; let n = 0;
    req.on('data', c => { n += c.length; if (n > (3 << 20)) { reject(new Error('too large')); req.destroy(); } else chunks.push(c); });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

async function handle(req, res) {
  // /version is public (system:public-info-viewer), but credentials that are presented must
  // be valid, as the API server treats them.
  if (req.url === '/version' && (req.headers.authorization || req.client.authorized) && !authenticated(req)) return send(res, 401, status(401, 'Unauthorized', 'Unauthorized'));
  if (req.url === '/version') return send(res, 200, { major: '1', minor: '30', gitVersion: 'v1.30.0-autopatch-stub', platform: 'linux/amd64' });
  if (req.url === '/stub/report') return authenticated(req) ? send(res, 200, report) : send(res, 401, status(401, 'Unauthorized', 'Unauthorized'));
  const r = route(req);
  const verb = r.resource ? verbOf(req.method, r) : '';
  const denied = gate(req, r, verb);
  if (denied) return send(res, denied.code, denied);
  if (r.sub === 'exec') {
    const refusal = execRefusal(r);
    return send(res, refusal.code, refusal.code === 200 ? status(400, 'BadRequest', 'Upgrade request required') : refusal);
  }
  const store = r.kind === 'Pod' ? pods : policies;
  const plural = r.kind === 'Pod' ? 'pods' : 'networkpolicies';
  const group = r.group ? `${r.group}/v1` : 'v1';
  if (req.method === 'POST' && !r.name) {
    let obj;
    try { obj = JSON.parse(await readBody(req)); } catch (e) { return send(res, 400, status(400, 'BadRequest', `the object provided is unrecognized (must be of type ${r.kind}): ${e.message}`)); }
    if (obj.kind !== r.kind || obj.apiVersion !== group) return send(res, 400, status(400, 'BadRequest', `the API version in the data (${obj.apiVersion}) does not match the expected API version (${group})`));
    const fv = fieldValidation(req, res, r, obj);
    if (fv) return send(res, fv.code, fv);
    const Model = r.kind === 'Pod' ? Pod : NetworkPolicy;
    const causes = [...schemaCauses(Model, obj), ...metaCauses(obj), ...(r.kind === 'Pod' ? podCauses(obj) : [])];
    if (causes.length) return send(res, 422, invalid(r.kind, (obj.metadata || {}).name, causes));
    const name = obj.metadata.name;
    if (store.has(name)) return send(res, 409, status(409, 'AlreadyExists', `${plural} "${name}" already exists`, { name, kind: plural }));
    if (r.kind === 'Pod') {
      const v = restrictedViolations(obj);
      if (v.length) return send(res, 403, status(403, 'Forbidden', `pods "${name}" is forbidden: violates PodSecurity "restricted:latest": ${v.join(', ')}`));
      if (obj.spec.runtimeClassName && !opts.runtimeClasses[obj.spec.runtimeClassName]) return send(res, 403, status(403, 'Forbidden', `pods "${name}" is forbidden: pod rejected: RuntimeClass "${obj.spec.runtimeClassName}" not found`));
      if (((obj.metadata || {}).labels || {})['autopatch.owner'] !== undefined) {
        const bv = boxViolations(obj);
        if (bv.length) return send(res, 403, status(403, 'Forbidden', `admission webhook "autopatch-box-hardening" denied the request: pods "${name}" is forbidden: ${bv.join('; ')}`));
      }
      if (obj.spec.automountServiceAccountToken !== false) log(`pod ${name} would get a service-account token`);
    }
    obj.metadata = Object.assign({}, obj.metadata, { namespace: r.ns, uid: crypto.randomUUID(), resourceVersion: String(Date.now()), creationTimestamp: now() });
    if (r.kind === 'Pod') {
      obj.status = { phase: 'Pending', conditions: [{ type: 'PodScheduled', status: 'True' }] };
      const rec = { obj, containers: [], volumes: [] };
      store.set(name, rec);
      rec.started = startPod(obj, rec);
    } else {
      store.set(name, { obj });
      await reenforce();
    }
    return send(res, 201, obj);
  }
  if (req.method === 'GET' && !r.name) {
    const sel = r.url.searchParams.get('labelSelector');
    const items = [];
    for (const rec of store.values()) {
      if (!labelSelectorMatches(sel, rec.obj.metadata.labels)) continue;
      if (r.kind === 'Pod') await refresh(rec);
      items.push(rec.obj);
    }
    return send(res, 200, { kind: `${r.kind}List`, apiVersion: group, metadata: { resourceVersion: String(Date.now()) }, items });
  }
  const rec = store.get(r.name);
  if (!rec) return send(res, 404, status(404, 'NotFound', `${plural} "${r.name}" not found`, { name: r.name, kind: plural }));
  if (req.method === 'GET' && r.sub === 'log') {
    const ct = r.url.searchParams.get('container');
    const c = rec.containers.find(x => x.name === ct) || rec.containers[0];
    if (!c) return send(res, 400, status(400, 'BadRequest', `container "${ct}" in pod "${r.name}" is waiting to start`));
    const tail = r.url.searchParams.get('tailLines');
    const out = await docker(['logs', ...(tail ? ['--tail', tail] : []), c.docker]);
    res.writeHead(200, { 'Content-Type': 'text/plain' });
    return res.end(out.stdout + out.stderr);
  }
  if (req.method === 'GET') {
    if (r.kind === 'Pod') await refresh(rec);
    return send(res, 200, rec.obj);
  }
  if (req.method === 'DELETE') {
    if (r.kind === 'Pod') {
      let body = null;
      try { const t = await readBody(req); body = t ? JSON.parse(t) : null; } catch (e) { body = null; }
      await deletePod(r, rec, body);
      return send(res, 200, rec.obj);
    }
    store.delete(r.name);
    await checkCoverage(r.name);
    if (!opts.ignorePolicyDeletes) {
      await reenforce();
    } else {
      ghostPolicies.set(r.name, rec);
    }
    return send(res, 200, r.kind === 'Pod' ? rec.obj : { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success', details: { name: r.name, group: r.group, kind: plural } });
  }
  return send(res, 405, status(405, 'MethodNotAllowed', `the server does not allow this method on the requested resource`));
}

// maxHeaderSize: the API server takes 1 MiB of headers (MaxHeaderBytes), and an exec's
// command travels in the request line (Node's default, 16 KiB, refused the Tester's scripts).
const server = https.createServer({
  maxHeaderSize: 1 << 20,
  cert: fs.readFileSync(opts.cert), key: fs.readFileSync(opts.key),
  ca: opts.ca ? fs.readFileSync(opts.ca) : undefined, requestCert: !!opts.ca, rejectUnauthorized: false,
}, (req, res) => {
  handle(req, res).catch(e => { log('error', e.stack); send(res, 500, status(500, 'InternalError', `Internal error occurred: ${e.message}`)); });
});

server.on('clientError', (err, socket) => {
  log('client error', err.code || '', err.message, err.rawPacket ? JSON.stringify(err.rawPacket.toString('latin1').split('\r\n')[0]) : '');
  if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n');
});

server.on('upgrade', (req, socket, head) => {
  const r = route(req);
  const reject = (st) => {
    const body = JSON.stringify(st);
    socket.end(`HTTP/1.1 ${st.code} ${st.reason}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
  };
  if (r.sub !== 'exec') return reject(status(400, 'BadRequest', 'only pods/exec can be upgraded'));
  report.upgrades.push({ method: req.method, host: req.headers.host || null, origin: req.headers.origin || null });
  const denied = gate(req, r, req.method === 'POST' ? 'create' : 'get');
  if (denied) return reject(denied);
  const refusal = execRefusal(r);
  if (refusal.code !== 200) return reject(refusal);
  const rec = pods.get(r.name);
  const offered = (req.headers['sec-websocket-protocol'] || '').split(',').map(s => s.trim());
  if (!opts.protocols.some(p => offered.includes(p))) return reject(status(400, 'BadRequest', `none of the offered subprotocols (${offered.join(', ')}) is supported`));
  wss.handleUpgrade(req, socket, head, (ws) => execSocket(ws, rec, r.url.searchParams));
});

async function shutdown() {
  for (const rec of [...pods.values(), ...live]) await removePod(rec);
  process.exit(0);
}
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);

import('@kubernetes/client-node').then((m) => {
  models = m;
  server.listen(opts.port, '127.0.0.1', () => {
    process.stdout.write(JSON.stringify({ port: server.address().port }) + '\n');
  });
});
