// Replays end with their client (docs/security.md, issue 12 hole 9): clients that connect with
// `from=0` to a session with a 2 MB log and drop after 20 ms, 100 at a time for 40 s, must not
// grow the runner's memory nor leave it reading Redis for clients that have gone. Runs on the
// shared stack (test/global-setup.ts), which nothing else uses while this file runs.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import WebSocket from "ws";
import { describe, expect, inject, it } from "vitest";
import { toolPath } from "../scripts/test-tools.js";
import { TENANTS } from "./global-setup.js";
import { Api, TermClient, line, until } from "./harness.js";

const url = inject("edgeUrl");
const runnerPid = inject("runnerPid");
const redisPort = new URL(inject("redisUrl")).port;
const api = new Api(url, TENANTS.acme);

function rssBytes(pid: number): number {
  const match = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return Number(match?.[1] ?? 0) * 1024;
}

/** How many XRANGE/XREVRANGE calls Redis has served so far. */
function redisReads(): number {
  const stats = execFileSync(toolPath("redis-cli"), ["-p", redisPort, "info", "commandstats"], { encoding: "utf8" });
  let calls = 0;
  for (const match of stats.matchAll(/^cmdstat_(?:xrange|xrevrange):calls=(\d+)/gm)) calls += Number(match[1]);
  return calls;
}

/** Connects with from=0 and drops (TCP reset) 20 ms after the socket opens. */
function connectAndDrop(id: string): Promise<void> {
  return new Promise((resolve) => {
    const ws = new WebSocket(`${url.replace(/^http/, "ws")}/v1/sessions/${id}/connect?from=0`, {
      headers: { authorization: `Bearer ${TENANTS.acme}` },
    });
    const done = () => resolve();
    ws.on("open", () => setTimeout(() => ws.terminate(), 20));
    ws.on("close", done);
    ws.on("error", done);
  });
}

describe("replay churn", () => {
  it("keeps the runner flat and stops reading when 100 loops connect with from=0 and drop for 40 s", { timeout: 120_000 }, async () => {
    const s = await api.create({ command: "/bin/bash", args: ["--norc", "--noprofile"] });
    const watcher = new TermClient(url, s.id, TENANTS.acme, { query: "from=live" });
    await watcher.waitForMessage((m) => m.type === "live", "live");
    watcher.send("head -c 1500000 /dev/urandom | base64; echo log-$((1+1))\n");
    await watcher.waitForOutput(line("log-2"), 30_000);
    expect((await api.get(s.id)).offset).toBeGreaterThan(2_000_000);
    // One full replay first, so the baseline includes what any replay allocates once.
    const warm = new TermClient(url, s.id, TENANTS.acme, { query: "from=0" });
    await warm.waitForMessage((m) => m.type === "live", "the warm-up replay", 30_000);
    warm.socket.terminate();

    const baseline = rssBytes(runnerPid);
    let peak = baseline;
    const sampler = setInterval(() => {
      peak = Math.max(peak, rssBytes(runnerPid));
    }, 250);
    const echoMs: number[] = [];
    const deadline = Date.now() + 40_000;
    const loops = Array.from({ length: 100 }, async () => {
      while (Date.now() < deadline) await connectAndDrop(s.id);
    });
    // Meanwhile the session stays usable: an echo every 2 s.
    let n = 0;
    while (Date.now() < deadline - 2000) {
      const t0 = Date.now();
      watcher.send(`echo churn-$((${n}+1000))\n`);
      await watcher.waitForOutput(line(`churn-${n + 1000}`), 30_000);
      echoMs.push(Date.now() - t0);
      n++;
      await new Promise((r) => setTimeout(r, 2000)); // pacing of the probe, not a synchronisation
    }
    await Promise.all(loops);
    const stoppedAt = Date.now();
    clearInterval(sampler);

    // Reads in flight when the churn stopped may finish; then none may start.
    const settled = await until(
      async () => {
        const a = redisReads();
        await new Promise((r) => setTimeout(r, 1000)); // the observation window
        return redisReads() === a ? a : undefined;
      },
      10_000,
      "Redis reads to stop",
    );
    const quietSince = Date.now();
    await new Promise((r) => setTimeout(r, 3000)); // the observation window
    expect(redisReads()).toBe(settled);
    const after = rssBytes(runnerPid);
    const result = {
      baselineMiB: +(baseline / 2 ** 20).toFixed(1),
      peakMiB: +(peak / 2 ** 20).toFixed(1),
      afterMiB: +(after / 2 ** 20).toFixed(1),
      readsStoppedAfterMs: quietSince - stoppedAt,
      echoMsMax: Math.max(...echoMs),
      echoMsMedian: echoMs.sort((a, b) => a - b)[Math.floor(echoMs.length / 2)],
    };
    console.info("replay churn", JSON.stringify(result));
    expect(peak - baseline).toBeLessThan(64 * 2 ** 20);
    expect(after - baseline).toBeLessThan(64 * 2 ** 20);
    watcher.socket.terminate();
    await api.destroy(s.id);
  });
});
