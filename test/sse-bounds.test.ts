// Issue 24, bounded SSE (docs/protocol.md §5b and Events; docs/security.md, Fair share): Server-
// Sent Events streams that never read cannot grow the edge or slow other tenants. 31 paused
// session streams and a 150 MB flood: each stream ends with one `cut` event naming the offset to
// resume from, having had every byte before it; the edge's workerd grows by less than 64 MiB;
// another tenant's GETs keep their median, and a p99 within 400 ms or 8× that of the same flood
// without streams (measured first, same run); a resume from the cut's id gets every later byte. A paused
// `GET /v1/events` stream past its 1 MiB bound gets the same `cut` with the last id it took, and
// a resume from it gets every later event once. A stack of its own: the flood would disturb
// other suites.
import { beforeAll, describe, expect, it, onTestFailed } from "vitest";
import { descendantsNamed, rssKiB } from "../bench/proc.js";
import type { Edge } from "../scripts/stack.js";
import { Api, EventStreamClient, SseClient, SuiteCleanup, fetchOutput, startSuiteStack, tenantEvents, until } from "./harness.js";

const A = { tenant: "flooder", key: "sse-bounds-a" };
const B = { tenant: "bystander", key: "sse-bounds-b" };
/** The default slots are 32: the 31 streams, and one left for the resume. */
const STREAMS = 31;
/** 112,000,000 random bytes as one line of base64: 149,333,336 bytes of output. */
const FLOOD = "head -c 112000000 /dev/urandom | base64 -w 0; echo; echo flood-done";
const MiB = 2 ** 20;

const cleanup = new SuiteCleanup();
let edge: Edge;
let apiA: Api;
let apiB: Api;

beforeAll(async () => {
  ({ edge } = await startSuiteStack(
    {
      apiKeys: `${A.tenant}:${A.key},${B.tenant}:${B.key}`,
      redis: true,
      // Every byte of the flood stays in the log, so a resume from anywhere in it replays.
      runners: [{ runnerId: "sse-bounds-runner", env: { OUTPUT_RETAIN_BYTES: String(256 * MiB) } }],
    },
    cleanup,
  ));
  apiA = new Api(edge.url, A.key);
  apiB = new Api(edge.url, B.key);
});

/** RSS of the edge's workerd processes (wrangler dev runs them as its children). */
function workerdRss(): number {
  return descendantsNamed(edge.pid, "workerd").reduce((sum, pid) => sum + rssKiB(pid) * 1024, 0);
}

function dumpOnFailure(): void {
  onTestFailed(() => console.error(`---- edge ----\n${edge.output().slice(-4000)}`));
}

/** The `cut` event a stream ended with, checked whole: its id and the one its data names agree. */
function cutOf(stream: EventStreamClient): { id: string; code: string; message: string; lastEventId: string } {
  const last = stream.events.at(-1);
  expect(last?.event).toBe("cut");
  const data = JSON.parse(last?.data ?? "null") as { code: string; message: string; lastEventId: string };
  expect(data).toEqual({ code: "SLOW_CONSUMER", message: "slow consumer: reconnect with Last-Event-ID", lastEventId: last?.id });
  return { id: last?.id as string, ...data };
}

interface FloodRun {
  /** The session's offset at its exit. */
  end: number;
  ms: number;
  /** workerd's largest RSS, sampled every 200 ms from `go` to the exit. */
  peak: number;
  /** Another tenant's `GET /v1/sessions/:id`, one after another through the flood (ms). */
  latencies: number[];
}

/** A session that floods once it reads a line (typed echo off: every byte is the flood's). */
async function floodSession(): Promise<{ id: string }> {
  const s = await apiA.create({ command: "/bin/sh", args: ["-c", `stty -echo; echo ready; read go; ${FLOOD}`] });
  cleanup.session(apiA, s.id);
  await until(async () => (await apiA.get(s.id)).offset >= "ready\r\n".length, 10_000, "the session's first line");
  return s;
}

/** Starts the flood and measures the edge until the session exits. */
async function flood(id: string, otherId: string): Promise<FloodRun> {
  let peak = workerdRss();
  const sampler = setInterval(() => (peak = Math.max(peak, workerdRss())), 200);
  let flooding = true;
  const latencies: number[] = [];
  const poller = (async () => {
    while (flooding) {
      const started = performance.now();
      const res = await apiB.request("GET", `/v1/sessions/${otherId}`);
      latencies.push(performance.now() - started);
      expect(res.status).toBe(200);
      await new Promise((r) => setTimeout(r, 10)); // a steady poll, not a wait for a result
    }
  })();
  const started = Date.now();
  await apiA.input(id, "go\n");
  const waited = await apiA.request("GET", `/v1/sessions/${id}/wait?timeoutSec=300`);
  const ms = Date.now() - started;
  flooding = false;
  await poller;
  clearInterval(sampler);
  peak = Math.max(peak, workerdRss());
  expect(waited.body).toMatchObject({ status: "exited", exitCode: 0 });
  expect(waited.body.offset).toBeGreaterThan(149_000_000);
  return { end: waited.body.offset as number, ms, peak, latencies: latencies.sort((x, y) => x - y) };
}

/** The latency at quantile `q` (0.99: the p99) of a run's GETs. */
function quantile(run: FloodRun, q: number): number {
  return run.latencies[Math.ceil(run.latencies.length * q) - 1];
}

function summary(run: FloodRun, before: number) {
  const ms = (q: number) => +quantile(run, q).toFixed(1);
  const mib = (bytes: number) => +(bytes / MiB).toFixed(1);
  return { ms: run.ms, beforeMiB: mib(before), peakMiB: mib(run.peak), gets: run.latencies.length, p50: ms(0.5), p99: ms(0.99), max: ms(1) };
}

describe("bounded SSE streams", () => {
  it(
    "cuts 31 paused session streams in a 150 MB flood with a resume id; workerd stays flat; others stay fast",
    { timeout: 420_000 },
    async () => {
      dumpOnFailure();
      const other = await apiB.create({ command: "/bin/sleep", args: ["600"] });
      cleanup.session(apiB, other.id);
      // The same flood with no stream first, twice: a fresh workerd grows its heap on the first
      // ones (by ~75 MiB, then ~20 MiB here) before it settles, as a running edge has; the second
      // is also what the other tenant's GETs and workerd's RSS do on a warm edge without streams.
      let warmRun: FloodRun | undefined;
      for (const round of ["first", "second"]) {
        const warm = await floodSession();
        const warmBefore = workerdRss();
        warmRun = await flood(warm.id, other.id);
        console.info(`flood without streams (${round})`, JSON.stringify(summary(warmRun, warmBefore)));
        await apiA.destroy(warm.id);
      }
      const baseline = warmRun as FloodRun;

      const s = await floodSession();
      const before = workerdRss();
      const paused = Array.from({ length: STREAMS }, () =>
        cleanup.stream(new SseClient(edge.url, s.id, A.key, { query: "from=0", paused: true })),
      );
      await Promise.all(paused.map((p) => p.waitFor(() => p.status !== 0, "the stream's answer")));
      expect(paused.map((p) => p.status)).toEqual(paused.map(() => 200));
      const run = await flood(s.id, other.id);
      console.info(`flood with ${STREAMS} paused streams`, JSON.stringify(summary(run, before)));
      const { end } = run;

      // Read now: each stream has every byte up to its cut, then the cut naming where it stopped.
      const output = await fetchOutput(apiA, s.id, 0);
      expect(output).toMatchObject({ from: 0, to: end });
      for (const p of paused) p.resume();
      await Promise.all(paused.map((p) => p.waitFor(() => p.ended, "the cut stream's end", 120_000)));
      const cuts = paused.map((p) => {
        const cut = cutOf(p);
        expect(Number(cut.id)).toBe(p.bytes.byteLength);
        expect(p.outputEvents().at(-1)?.id).toBe(cut.id);
        expect(p.bytes.equals(output.bytes.subarray(0, p.bytes.byteLength))).toBe(true);
        return Number(cut.id);
      });
      console.info("cut at (MiB)", JSON.stringify(cuts.map((c) => +(c / MiB).toFixed(1))));
      expect(Math.max(...cuts)).toBeLessThan(end);

      // Soft: a miss here still fails the test, and the resume below still runs and reports.
      expect.soft(run.peak - before, "workerd's growth with the streams (bytes)").toBeLessThan(64 * MiB);
      // The other tenant's GETs, against the same flood without streams in this run: the median
      // as before, and the tail within a bound. The 31 streams cut at their bound cost the edge
      // work in bursts; the tail measured 69–102 ms against 14–26 ms without streams on this
      // 2-core machine when the bound was set, and 131–249 ms against 29–43 ms on quiet runs of
      // 2026-11-27 (the code of 8e4ef7f alike: the machine was slower that day). The edge's share
      // of a flood is issue 26's to cut. The bound is the larger of 400 ms and 8× the p99 without
      // streams, so that a slower hour of the same machine does not fail the test; an edge that
      // serves others seconds late (4 s before issue 24) fails it.
      expect.soft(quantile(run, 0.5), "the other tenant's p50 (ms)").toBeLessThan(2 * quantile(baseline, 0.5) + 5);
      expect.soft(quantile(run, 0.99), "the other tenant's p99 (ms)").toBeLessThan(Math.max(400, 8 * quantile(baseline, 0.99)));

      // A resume from the cut's id (as an EventSource would send it) gets every later byte, then exit.
      const from = cuts[0];
      const resumed = cleanup.stream(new SseClient(edge.url, s.id, A.key, { lastEventId: String(from) }));
      await resumed.waitFor(() => resumed.ended, "the resumed stream's exit", 180_000);
      const how = `the resumed stream: status ${resumed.status}, ${resumed.bytes.byteLength} bytes, broken: ${resumed.error ?? "no"}`;
      expect(resumed.events.filter((e) => e.event !== "data").map((e) => e.event), how).toEqual(["exit"]);
      expect(resumed.json("exit")[0]).toMatchObject({ status: "exited", exitCode: 0, offset: end });
      expect(resumed.bytes.byteLength).toBe(end - from);
      expect(resumed.bytes.equals(output.bytes.subarray(from))).toBe(true);
    },
  );

  it("cuts a paused GET /v1/events stream past its bound with the last id it took; a resume gets every later event once", {
    timeout: 240_000,
  }, async () => {
    dumpOnFailure();
    // Each event carries the session: with 6 args of 60,000 characters, about 360 KB.
    const big = Array.from({ length: 6 }, (_, i) => String(i).repeat(60_000));
    const reader = cleanup.stream(tenantEvents(edge.url, A.key));
    const paused = cleanup.stream(tenantEvents(edge.url, A.key, { paused: true }));
    await reader.waitFor(() => reader.status === 200 && reader.comments.length > 0, "the reading stream to open");
    await paused.waitFor(() => paused.status === 200, "the paused stream's answer");
    const s = await apiA.create({ command: "/bin/sh", args: ["-c", "sleep 600", ...big] });
    cleanup.session(apiA, s.id);
    // 120 label changes, one event of ~360 KB each: 43 MB, far past what the paused stream's
    // socket buffers and its 1 MiB bound hold.
    for (let label = 1; label <= 120; label++) {
      const res = await apiA.request("PATCH", `/v1/sessions/${s.id}`, { label: `l${label}` });
      expect(res.status).toBe(200);
    }
    await reader.waitFor(() => reader.json().some((e) => e.session.label === "l120"), "the last label's event", 60_000);
    const lastId = reader.events.at(-1)?.id as string;

    paused.resume();
    await paused.waitFor(() => paused.ended, "the paused stream's end", 60_000);
    const cut = cutOf(paused);
    const taken = paused.events.slice(0, -1);
    expect(taken.length).toBeGreaterThan(0);
    expect(taken.at(-1)?.id).toBe(cut.id);
    // What it had is exactly what the reading stream had up to there, in order.
    const readerIds = reader.events.map((e) => e.id);
    const upTo = readerIds.indexOf(cut.id) + 1;
    expect(upTo).toBeGreaterThan(0);
    expect(taken.map((e) => [e.id, e.event, e.data])).toEqual(reader.events.slice(0, upTo).map((e) => [e.id, e.event, e.data]));
    expect(Number(cut.id)).toBeLessThan(Number(lastId));

    // A resume from the cut's id: every later event once, in order, and then live ones.
    const resumed = cleanup.stream(tenantEvents(edge.url, A.key, { lastEventId: cut.id }));
    await resumed.waitFor(() => resumed.events.at(-1)?.id === lastId, "the resumed stream to catch up", 60_000);
    expect(resumed.events.map((e) => [e.id, e.event, e.data])).toEqual(reader.events.slice(upTo).map((e) => [e.id, e.event, e.data]));
    await apiA.destroy(s.id);
    await resumed.waitFor(() => resumed.events.some((e) => e.event === "session.deleted"), "the purge's event");
    expect(resumed.events.map((e) => Number(e.id))).toEqual(resumed.events.map((_, i) => Number(cut.id) + 1 + i));
  });
});
