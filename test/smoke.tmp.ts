import { startEdge, startRunner, secret } from "../scripts/stack.js";
import { Api, TermClient, waitForRunners } from "./harness.js";
const token = secret();
const edge = await startEdge({ apiKeys: "acme:k1,globex:k2", runnerToken: token });
const runner = startRunner({ brokerUrl: edge.url, runnerToken: token, env: { RUNNER_WORKSPACE: "/tmp/exp/ws", ...JSON.parse(process.env.RENV ?? "{}") } });
try {
  await waitForRunners(edge.url, token, 1);
  const api = new Api(edge.url, "k1");
  const s = await api.create(JSON.parse(process.env.BODY ?? '{"command":"/bin/bash","args":["--norc","--noprofile"]}'));
  const c = new TermClient(edge.url, s.id, "k1");
  await c.opened;
  const cmds = (process.env.CMDS ?? "id; hostname; ps -e; cat /etc/passwd; cat /proc/self/cgroup; ls -la /workspace /tmp; echo > /dev/tcp/127.0.0.1/" + new URL(edge.url).port + " && echo REACHED-EDGE; exit 5").split("\n");
  for (const cmd of cmds) c.send(cmd + "\n");
  const deadline = Date.now() + 15000;
  while (Date.now() < deadline) { const g = await api.get(s.id); if (g.status !== "running" && g.status !== "starting") { console.log(JSON.stringify(g)); break; } await new Promise(r => setTimeout(r, 200)); }
  console.log(c.text);
} catch (e) { console.log("ERR", e); }
finally { await runner.stop(); console.log(runner.output().split("\n").filter(l => /warn|error|sandbox|network|limits/.test(l)).slice(-15).join("\n")); await edge.stop(); c: null; }
