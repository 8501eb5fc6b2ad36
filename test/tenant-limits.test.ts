// Issue 28, last part: a tenant's disk and log bytes as data (docs/protocol.md, "Tenants and
// keys"; §7, the spawn's `tenantLimits`). On a stack of its own with ADMIN_KEY set, Redis, and one
// root runner with RUNNER_SANDBOX=bwrap whose own bounds are large (TENANT_LOG_BYTES unset: 1 GiB;
// TENANT_DISK_MIB 160): a tenant made through the admin API with `logBytes` of 16 MiB floods 64
// MiB over four sessions while another admin-made tenant without limits has a 1 MiB session; the
// second tenant's output replays whole, the first's oldest output is a gap and its streams in
// Redis hold at most its bound; a PATCH holds from the tenant's next spawn (lowered, and given back
// to the runner's). A tenant with `diskMiB` 64 gets ENOSPC writing 100 MiB in its workspace while
// a tenant on the runner's default writes it; raised (and lowered), the tenant's next spawn that
// finds none of its sessions on the runner resizes its filesystem. Bad
// values at the admin API are 400 and change nothing. This suite must run as root (CI does).
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { secret } from "../scripts/stack.js";
import type { Session } from "../shared/session.js";
import { cli } from "./redis-server.js";
import { Api, SuiteCleanup, type SuiteStack, TermClient, fetchOutput, seqBytes, startSuiteStack, until } from "./harness.js";

const ADMIN_KEY = secret();
const MIB = 1 << 20;
const BOUND = 16 * MIB;
const CHUNK = 64 << 10;
const FLOOD = 16 * MIB;
const QUIET = MIB;
const RUNNER_DISK_MIB = 160;
const cleanup = new SuiteCleanup();
const scratch = mkdtempSync(join(tmpdir(), "ptybroker-tenant-limits-"));
cleanup.folder(scratch);
let stack: SuiteStack;
let admin: Api;

beforeAll(async () => {
  if (process.getuid?.() !== 0) throw new Error("test/tenant-limits.test.ts must run as root (sandboxes, tenant filesystems)");
  stack = await startSuiteStack(
    {
      apiKeys: "limits-static:limits-static-key",
      vars: { ADMIN_KEY },
      redis: true,
      runners: [
        {
          env: {
            RUNNER_WORKSPACE: join(scratch, "workspace"),
            RUNNER_SANDBOX: "bwrap",
            TENANT_DISK_MIB: String(RUNNER_DISK_MIB),
            COALESCE_BYTES: String(CHUNK),
            // Above what a session writes: only the tenant bound trims.
            OUTPUT_RETAIN_BYTES: String(2 * FLOOD),
          },
        },
      ],
    },
    cleanup,
  );
  admin = new Api(stack.edge.url, ADMIN_KEY);
}, 120_000);

/** A tenant made through the admin API, and a key of every scope for it. */
async function newTenant(id: string, limits?: Record<string, number>): Promise<Api> {
  const made = await admin.request("POST", "/admin/v1/tenants", limits ? { id, limits } : { id });
  expect(made.status, JSON.stringify(made.body)).toBe(201);
  const key = await admin.request<{ key: string }>("POST", `/admin/v1/tenants/${id}/keys`, { name: "owner" });
  expect(key.status, JSON.stringify(key.body)).toBe(201);
  return new Api(stack.edge.url, key.body.key);
}

async function patchLimits(id: string, limits: Record<string, number | null>): Promise<void> {
  const res = await admin.request("PATCH", `/admin/v1/tenants/${id}`, { limits });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
}

/** A `pty: false` session of `/bin/sh -c script` run to its end; purged after the file. */
async function runToEnd(api: Api, script: string): Promise<Session> {
  const session = await api.create({ pty: false, command: "/bin/sh", args: ["-c", script] });
  cleanup.session(api, session.id);
  const done = await api.request<Session>("GET", `/v1/sessions/${session.id}/wait?timeoutSec=50`);
  expect(done.body.status, JSON.stringify(done.body)).toBe("exited");
  return done.body;
}

/** Bytes the tenant's streams hold, summed over their entries in Redis itself (not the log's count). */
async function tenantStreamBytes(tenant: string): Promise<number> {
  const streams = (await cli(stack.redis.port, "--scan", "--pattern", `ptyb:{${tenant}/*}:out`)).split("\n").filter(Boolean);
  const sum = `local n = 0
    for _, e in ipairs(redis.call('XRANGE', KEYS[1], '-', '+')) do
      for i = 1, #e[2], 2 do if e[2][i] == 'd' then n = n + string.len(e[2][i + 1]) end end
    end
    return n`;
  let total = 0;
  for (const stream of streams) total += Number((await cli(stack.redis.port, "EVAL", sum, "1", stream)).trim());
  return total;
}

/** The offset the session's stream starts at (its first entry's ID), or `end` when it holds nothing. */
async function streamStart(tenant: string, id: string, end: number): Promise<number> {
  const [stream] = (await cli(stack.redis.port, "--scan", "--pattern", `ptyb:{${tenant}/${id}/*}:out`)).split("\n").filter(Boolean);
  const first = "local e = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)[1] return e and e[1] or ''";
  const entry = (await cli(stack.redis.port, "EVAL", first, "1", stream)).trim();
  return entry === "" ? end : Number(entry.slice(0, entry.indexOf("-")));
}

/** Waits until the tenant's streams hold at most `bound`; returns what they hold then. */
async function heldWithin(tenant: string, bound: number): Promise<number> {
  return until(
    async () => {
      const bytes = await tenantStreamBytes(tenant);
      return bytes <= bound ? bytes : undefined;
    },
    30_000,
    `${tenant}'s streams to hold at most ${bound} bytes`,
  );
}

describe("a tenant's log bytes", () => {
  it("bound that tenant's retained output, oldest first, never another tenant's; a PATCH holds from the next spawn", { timeout: 240_000 }, async () => {
    const flood = await newTenant("limflood", { logBytes: BOUND });
    const quiet = await newTenant("limquiet");
    expect((await admin.request("GET", "/admin/v1/tenants/limflood")).body).toMatchObject({ id: "limflood", limits: { logBytes: BOUND } });

    const quietSession = await runToEnd(quiet, `seq 1 9999999 | head -c ${QUIET}`);
    expect(quietSession.offset).toBe(QUIET);
    const starts = [1, 2_000_001, 4_000_001, 6_000_001];
    const sessions = await Promise.all(starts.map((start) => runToEnd(flood, `seq ${start} 99999999 | head -c ${FLOOD}`)));
    for (const s of sessions) expect(s.offset).toBe(FLOOD);

    const held = await heldWithin("limflood", BOUND);
    expect(held).toBeGreaterThan(BOUND - CHUNK);
    // The oldest output went: the first session's log starts later (its record says so once the
    // runner has told the edge), said as a gap on a replay.
    const start = await streamStart("limflood", sessions[0].id, FLOOD);
    expect(start).toBeGreaterThan(0);
    const first = await until(
      async () => {
        const s = await flood.get(sessions[0].id);
        return s.retainedFrom === start ? s : undefined;
      },
      10_000,
      "the first session's retainedFrom to say where its log starts",
    );
    const replay = cleanup.client(new TermClient(stack.edge.url, first.id, flood.key as string, { query: "from=0" }));
    const gap = await replay.waitForMessage((m) => m.type === "gap", "a gap on the replay from 0");
    expect(gap).toEqual({ type: "gap", from: 0, to: first.retainedFrom });
    await replay.close();
    const output = await fetchOutput(flood, first.id, 0);
    expect(output.from).toBe(first.retainedFrom);
    expect(output.bytes.equals(seqBytes(starts[0], FLOOD).subarray(first.retainedFrom))).toBe(true);

    // The other tenant, bounded only by the runner's 1 GiB, replays whole, byte for byte.
    const quietOutput = await fetchOutput(quiet, quietSession.id, 0);
    expect(quietOutput.from).toBe(0);
    expect(quietOutput.bytes.equals(seqBytes(1, QUIET))).toBe(true);
    expect(await tenantStreamBytes("limquiet")).toBe(QUIET);

    // Lowered to 8 MiB: the next spawn carries it, and its output trims the tenant to it.
    await patchLimits("limflood", { logBytes: BOUND / 2 });
    await runToEnd(flood, `seq 1 9999999 | head -c ${QUIET}`);
    expect(await heldWithin("limflood", BOUND / 2)).toBeGreaterThan(BOUND / 2 - CHUNK);
    // Given back to the runner's (1 GiB): the next spawn's output is kept on top of it, nothing trimmed.
    const before = await tenantStreamBytes("limflood");
    await patchLimits("limflood", { logBytes: null });
    expect((await admin.request("GET", "/admin/v1/tenants/limflood")).body.limits).toEqual({});
    const last = await runToEnd(flood, `seq 1 9999999 | head -c ${QUIET}`);
    await until(async () => (await tenantStreamBytes("limflood")) === before + QUIET, 10_000, "the last session's output to be stored");
    expect((await fetchOutput(flood, last.id, 0)).bytes.equals(seqBytes(1, QUIET))).toBe(true);
  });
});

describe("a tenant's disk", () => {
  /** Writes `mib` MiB into the session's workspace; what dd's failure said (if anything), then the file's size. */
  const fill = (mib: number) =>
    `cd "$HOME" && dd if=/dev/zero of=fill bs=1M count=${mib} 2>&1 | grep -o 'No space left on device' | head -1; stat -c %s fill; rm -f fill`;

  it("bounds that tenant's workspace (ENOSPC inside) while another on the runner's default writes past it; changed, the next spawn resizes it", async () => {
    const small = await newTenant("limsmall", { diskMiB: 64 });
    const big = await newTenant("limbig");
    const refused = await runToEnd(small, fill(100));
    const [said, size] = (await fetchOutput(small, refused.id, 0)).bytes.toString().trim().split("\n");
    expect(said).toBe("No space left on device");
    expect(Number(size)).toBeLessThan(64 * MIB);
    const written = await runToEnd(big, fill(100));
    expect((await fetchOutput(big, written.id, 0)).bytes.toString()).toBe(`${100 * MIB}\n`);

    // Raised to 128 MiB: the next spawn (no session of the tenant runs) grows its image, and 100 MiB fit.
    await patchLimits("limsmall", { diskMiB: 128 });
    const grown = await runToEnd(small, fill(100));
    expect((await fetchOutput(small, grown.id, 0)).bytes.toString()).toBe(`${100 * MIB}\n`);
    // The other lowered to 64 MiB: its data fits, so the next spawn shrinks its image, and 100 MiB do not.
    await patchLimits("limbig", { diskMiB: 64 });
    const shrunk = await runToEnd(big, fill(100));
    const [shrunkSaid, shrunkSize] = (await fetchOutput(big, shrunk.id, 0)).bytes.toString().trim().split("\n");
    expect(shrunkSaid).toBe("No space left on device");
    expect(Number(shrunkSize)).toBeLessThan(64 * MIB);
  });
});

describe("bad values at the admin API", () => {
  it("are 400 with a message naming the limit, and change nothing", async () => {
    await newTenant("limtidy", { diskMiB: 64, logBytes: BOUND });
    const before = (await admin.request("GET", "/admin/v1/tenants/limtidy")).body;
    const bad: [Record<string, unknown>, string][] = [
      [{ diskMiB: 15 }, "at least 16 MiB"],
      [{ diskMiB: 64.5 }, "a whole number of MiB"],
      [{ diskMiB: 2 * MIB }, "at most 1048576 MiB"],
      [{ diskMiB: "64" }, "diskMiB"],
      [{ logBytes: MIB - 1 }, "at least 1048576 bytes"],
      [{ logBytes: 2 ** 41 }, "at most 1099511627776 bytes"],
      [{ logBytes: MIB + 0.5 }, "a whole number of bytes"],
    ];
    for (const [limits, message] of bad) {
      const patched = await admin.request("PATCH", "/admin/v1/tenants/limtidy", { limits });
      expect(patched.status, JSON.stringify(patched.body)).toBe(400);
      expect(patched.body.error.code).toBe("INVALID_REQUEST");
      expect(patched.body.error.message).toContain(message);
      const made = await admin.request("POST", "/admin/v1/tenants", { id: "limnever", limits });
      expect(made.status, JSON.stringify(made.body)).toBe(400);
      expect(made.body.error.message).toContain(message);
    }
    expect((await admin.request("GET", "/admin/v1/tenants/limtidy")).body).toEqual(before);
    expect((await admin.request("GET", "/admin/v1/tenants/limnever")).status).toBe(404);
  });
});
