// standins/k8s_stub/selftest.mjs - checks the stand-in with the official JavaScript client
// (@kubernetes/client-node), so it is not only autopatch's reading of the protocol:
// create a hardened pod, wait for it, exec with stdin (v5 half-close) and without, read the
// exit status from the Status object, hit the API's error codes, a NetworkPolicy round trip.
// Usage: node selftest.mjs KUBECONFIG NAMESPACE IMAGE EXPECTED_PROTOCOL
// Prints one JSON object with what it saw (tests/e2e/test_k8s_stub.py asserts on it).
import * as k8s from '@kubernetes/client-node';
import { PassThrough, Readable } from 'node:stream';

const [kcPath, ns, image, wantProto] = process.argv.slice(2);
const kc = new k8s.KubeConfig();
kc.loadFromFile(kcPath);
const core = kc.makeApiClient(k8s.CoreV1Api);
const net = kc.makeApiClient(k8s.NetworkingV1Api);
const out = {};
const name = `selftest-${process.pid}`;

const sc = { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, runAsNonRoot: true,
  runAsUser: 10001, capabilities: { drop: ['ALL'] }, seccompProfile: { type: 'RuntimeDefault' } };
const pod = { apiVersion: 'v1', kind: 'Pod', metadata: { name, labels: { app: 'selftest' } },
  spec: { restartPolicy: 'Never', automountServiceAccountToken: false,
    securityContext: { runAsNonRoot: true, runAsUser: 10001, fsGroup: 10001 },
    containers: [{ name: 'box', image, command: ['sleep', '300'], securityContext: sc,
      volumeMounts: [{ name: 'tmp', mountPath: '/tmp' }] }],
    volumes: [{ name: 'tmp', emptyDir: { medium: 'Memory', sizeLimit: '8Mi' } }] } };

async function code(p) {
  try { await p; return 200; } catch (e) { return { code: e.code, reason: JSON.parse(e.body || '{}').reason }; }
}

function exec(command, stdinText) {
  return new Promise((resolve, reject) => {
    const stdout = new PassThrough(), stderr = new PassThrough();
    let o = '', e = '';
    stdout.on('data', d => { o += d; });
    stderr.on('data', d => { e += d; });
    const stdin = stdinText === undefined ? null : Readable.from([Buffer.from(stdinText)]);
    new k8s.Exec(kc).exec(ns, name, 'box', command, stdout, stderr, stdin, false, (status) => {
      setTimeout(() => resolve({ stdout: o, stderr: e, status }), 50);
    }).then(ws => { out.protocol = ws.protocol; }).catch(reject);
  });
}

try {
  out.create = (await core.createNamespacedPod({ namespace: ns, body: pod })).status.phase;
  for (let i = 0; i < 300; i++) {
    const p = await core.readNamespacedPod({ namespace: ns, name });
    out.phase = p.status.phase;
    if (out.phase === 'Running') break;
    await new Promise(r => setTimeout(r, 100));
  }
  out.ok = await exec(['sh', '-c', 'id -u; echo to-err >&2']);
  out.fail = await exec(['sh', '-c', 'exit 3']);
  if (wantProto === 'v5.channel.k8s.io') out.stdin = await exec(['sh', '-c', 'wc -c; echo done'], 'hello stdin\n');
  out.duplicate = await code(core.createNamespacedPod({ namespace: ns, body: pod }));
  const bad = structuredClone(pod); bad.metadata.name = `${name}-bad`; bad.spec.containers[0].securityContext.runAsUser = 'x';
  out.invalid = await code(core.createNamespacedPod({ namespace: ns, body: bad }));
  const priv = structuredClone(pod); priv.metadata.name = `${name}-priv`; priv.spec.hostPID = true;
  out.privileged = await code(core.createNamespacedPod({ namespace: ns, body: priv }));
  out.missing = await code(core.readNamespacedPod({ namespace: ns, name: 'no-such-pod' }));
  out.other_ns = await code(core.listNamespacedPod({ namespace: 'kube-system' }));
  const np = { apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', metadata: { name, labels: { app: 'selftest' } },
    spec: { podSelector: { matchLabels: { app: 'selftest' } }, policyTypes: ['Ingress', 'Egress'], ingress: [], egress: [] } };
  out.policy_create = (await net.createNamespacedNetworkPolicy({ namespace: ns, body: np })).metadata.name === name;
  out.policy_list = (await net.listNamespacedNetworkPolicy({ namespace: ns, labelSelector: 'app=selftest' })).items.length;
  await net.deleteNamespacedNetworkPolicy({ namespace: ns, name });
  out.listed = (await core.listNamespacedPod({ namespace: ns, labelSelector: 'app=selftest' })).items.length;
} catch (e) {
  out.error = String(e && (e.body || e.message || e));
} finally {
  try { await core.deleteNamespacedPod({ namespace: ns, name }); out.deleted = true; } catch (e) { out.deleted = String(e.body || e); }
}
process.stdout.write(JSON.stringify(out) + '\n');
