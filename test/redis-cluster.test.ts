// The output log on a real Redis Cluster, end to end (docs/architecture.md, issue 12): an edge
// (wrangler dev → workerd), a 3-master Redis Cluster started here, and a runner whose REDIS_URL
// lists the cluster's nodes. Sessions land on every master (each session's stream on the master
// of its hash tag); what a live framed client received equals, byte for byte, `GET .../output`
// from 0 and a replay from an offset after the session exited. Then the edge restarts (so nothing
// is served from its replay cache) and a new runner whose REDIS_URL names one node only finds the
// cluster and serves the same history. Everything started here is stopped by PID in afterAll.
import { beforeAll, describe, expect, it, onTestFailed } from "vitest";
import { type Edge, type ManagedProcess, secret, startEdge, startRunner } from "../scripts/stack.js";
import { Api, SuiteCleanup, TermClient, fetchOutput, sha256, until } from "./harness.js";
import { type RedisCluster, cli, command, startRedisCluster } from "./redis-server.js";

const TENANT = "clustered";
const KEY = "cluster-e2e-key";
const runnerToken = secret();
const tokenSecret = secret();
const BASH = { command: "/bin/bash", args: ["--norc", "--noprofile"] };
const LINES = 200_000;
/** Sessions created at most while looking for one on each master (3 × (2/3)^24 ≈ 0.02 % short). */
const MAX_SESSIONS = 24;

const cleanup = new SuiteCleanup();
const persistTo = cleanup.tempFolder("ptybroker-cluster-edge-");
let edge: Edge | undefined;
let cluster: RedisCluster | undefined;
/** The runners started here: the cleanup's, stopped after the file. */
const runners = cleanup.runners;

/** One session per master, filled in by the first test and read again by the second. */
interface Logged {
  id: string;
  /** Port of the master that holds its stream. */
  master: number;
  stream: string;
  /** Everything a framed client connected from 0 received until `exit`. */
  live: Buffer;
}
const logged: Logged[] = [];

function edgeOptions(port?: number) {
  return { apiKeys: `${TENANT}:${KEY}`, runnerToken, tokenSecret, persistTo, port };
}

function launchRunner(runnerId: string, redisUrl: string): ManagedProcess {
  return cleanup.runner(startRunner({ brokerUrl: theEdge().url, runnerToken, runnerId, env: { REDIS_URL: redisUrl } }));
}

async function registeredRunners(): Promise<string[]> {
  const res = await fetch(`${theEdge().url}/internal/runners`, { headers: { authorization: `Bearer ${runnerToken}` } });
  const body = (await res.json()) as { runners: { runnerId: string }[] };
  return body.runners.map((r) => r.runnerId);
}

const theEdge = () => {
  if (!edge) throw new Error("no edge");
  return edge;
};
const theCluster = () => {
  if (!cluster) throw new Error("no redis cluster");
  return cluster;
};

/** On failure, the tail of what the runners printed: the evidence for a diagnosis. */
function dumpOnFailure(): void {
  onTestFailed(() => {
    for (const runner of runners) console.error(`---- runner (pid ${runner.pid}) ----\n${runner.output().slice(-6000)}`);
  });
}

/**
 * Where a session's stream is: the master whose keyspace has `ptyb:{tenant/id/<incarnation>}:out`
 * (SCAN is per node, so exactly one finds it), or undefined before its first append.
 */
async function streamHome(id: string): Promise<{ master: number; stream: string } | undefined> {
  const found = await Promise.all(
    theCluster().nodes.map(async (node) => {
      const keys = (await cli(node.port, "--scan", "--pattern", `ptyb:{${TENANT}/${id}/*}:out`)).split("\n").filter(Boolean);
      return keys.map((stream) => ({ master: node.port, stream }));
    }),
  );
  const homes = found.flat();
  expect(homes.length).toBeLessThanOrEqual(1);
  return homes[0];
}

/** A framed client from `from` until the session's `exit`, keeping every byte it got. */
async function readToExit(id: string, from: number): Promise<Buffer> {
  const client = new TermClient(theEdge().url, id, KEY, { query: `from=${from}` });
  const exit = await client.waitForMessage((m) => m.type === "exit", "exit", 30_000);
  expect(client.offsetErrors).toEqual([]);
  if (client.startOffset !== undefined) expect(client.startOffset).toBe(from);
  expect(exit.offset).toBe(client.nextOffset ?? from);
  const bytes = client.output;
  client.socket.terminate();
  return bytes;
}

/** Compares by length and digest: a failure says where, without printing megabytes. */
function expectSameBytes(got: Buffer, want: Buffer, what: string): void {
  expect(got.length, `${what}: length`).toBe(want.length);
  expect(sha256(got), `${what}: sha256`).toBe(sha256(want));
}

beforeAll(async () => {
  const [edgeStart, clusterStart] = await Promise.allSettled([startEdge(edgeOptions()), startRedisCluster()]);
  edge = edgeStart.status === "fulfilled" ? cleanup.edge(edgeStart.value) : undefined;
  cluster = clusterStart.status === "fulfilled" ? cleanup.redis(clusterStart.value) : undefined;
  for (const started of [edgeStart, clusterStart]) if (started.status === "rejected") throw started.reason;
  launchRunner("cluster-runner-1", theCluster().url);
  await until(async () => (await registeredRunners()).includes("cluster-runner-1"), 30_000, "cluster-runner-1");
});

describe("output log on a Redis Cluster", () => {
  it("puts sessions on every master and logs exactly what live clients received", async () => {
    dumpOnFailure();
    const api = new Api(theEdge().url, KEY);
    const masters = theCluster().nodes.map((node) => node.port);
    // Sessions until each master holds one's stream (a session's shard follows its key's hash).
    const chosen = new Map<number, { id: string; stream: string }>();
    const spare: string[] = [];
    for (let i = 0; i < MAX_SESSIONS && chosen.size < masters.length; i++) {
      const { id } = await api.create(BASH);
      const home = await until(() => streamHome(id), 15_000, `the stream of ${id}`); // bash's prompt is logged
      if (chosen.has(home.master)) spare.push(id);
      else chosen.set(home.master, { id, stream: home.stream });
    }
    await Promise.all(spare.map((id) => api.destroy(id)));
    expect([...chosen.keys()].sort()).toEqual([...masters].sort());

    // A flood on each at once, each watched by a framed client from offset 0.
    await Promise.all(
      [...chosen].map(async ([master, { id, stream }]) => {
        const client = new TermClient(theEdge().url, id, KEY, { query: "from=0" });
        await client.opened;
        client.send(`seq 1 ${LINES}; exit\n`);
        const exit = await client.waitForMessage((m) => m.type === "exit", `exit of ${id}`, 90_000);
        expect(client.offsetErrors).toEqual([]);
        expect(client.startOffset).toBe(0);
        expect(exit).toMatchObject({ status: "exited", exitCode: 0, offset: client.nextOffset });
        expect(client.text).toContain(`\r\n${LINES}\r\n`);
        logged.push({ id, master, stream, live: client.output });
        client.socket.terminate();
      }),
    );

    for (const { id, master, stream, live } of logged) {
      // The stream is on its master only: the others redirect to it.
      expect(Number((await command(master, `XLEN ${stream}`))?.slice(1))).toBeGreaterThan(0);
      for (const other of masters.filter((port) => port !== master)) {
        expect(await command(other, `EXISTS ${stream}`)).toMatch(new RegExp(`^-MOVED \\d+ 127\\.0\\.0\\.1:${master}$`));
      }
      // GET /output from 0: byte for byte what the live client got.
      const whole = await fetchOutput(api, id, 0);
      expect(whole.from).toBe(0);
      expectSameBytes(whole.bytes, live, `GET /output of ${id}`);
      // A client reconnecting after the exit with from=N gets exactly the rest.
      const from = Math.floor(live.length / 3) + 7;
      expectSameBytes(await readToExit(id, from), live.subarray(from), `replay of ${id} from ${from}`);
    }
  }, 180_000);

  it("a runner that names one node finds the cluster and serves the same history after an edge restart", async () => {
    dumpOnFailure();
    expect(logged).toHaveLength(3);
    // Nothing left that holds the output but the cluster: the first runner goes, and the edge
    // restarts (same port and Durable Object storage), so its replay cache is empty.
    for (const runner of [...runners]) {
      await runner.stop();
      runners.delete(runner);
    }
    const port = theEdge().port;
    await theEdge().stop();
    cleanup.edges.delete(theEdge());
    edge = undefined;
    edge = cleanup.edge(await startEdge(edgeOptions(port)));
    const node = theCluster().nodes[2];
    const runner = launchRunner("cluster-runner-2", node.url);
    await until(async () => (await registeredRunners()).includes("cluster-runner-2"), 30_000, "cluster-runner-2");
    expect(runner.output()).toContain(`"event":"redis.cluster","outcome":"detected","node":"127.0.0.1:${node.port}"`);
    expect(runner.output()).toContain(`"event":"redis.ready","mode":"cluster","masters":3`);

    const api = new Api(theEdge().url, KEY);
    for (const { id, live } of logged) {
      expect(await api.get(id)).toMatchObject({ status: "exited", offset: live.length });
      const whole = await fetchOutput(api, id, 0);
      expectSameBytes(whole.bytes, live, `GET /output of ${id} through one node`);
      const from = live.length - 12345;
      expectSameBytes(await readToExit(id, from), live.subarray(from), `replay of ${id} from ${from} through one node`);
    }
  }, 180_000);
});
