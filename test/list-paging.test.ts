// Paging of `GET /v1/sessions` (docs/protocol.md §3): `limit` 1..1000 (default 100) and `cursor`,
// answer `{"sessions", "nextCursor"}` in creation order, `nextCursor` null at the end. 23
// sessions tagged for this run, on the shared edge, read 10 at a time: 10, 10, 3, each once, in
// order.
import { randomBytes } from "node:crypto";
import { beforeAll, describe, expect, it } from "vitest";
import type { Session } from "../shared/session.js";
import { onSharedStack } from "./harness.js";

const suite = onSharedStack();
const { api } = suite;
const TAG = `paging-${randomBytes(6).toString("hex")}`;
const COUNT = 23;
const ids: string[] = [];

interface Page {
  sessions: Session[];
  nextCursor: string | null;
}

beforeAll(async () => {
  // One after another: creation order is the order of these ids.
  for (let i = 0; i < COUNT; i++) {
    const s = await suite.session({ id: `${TAG}-${String(i).padStart(2, "0")}`, command: "/bin/true", tags: [TAG] });
    ids.push(s.id);
  }
  // All of them ended, so that a status filter pages the same set.
  for (const id of ids) {
    const res = await api.request<Session>("GET", `/v1/sessions/${id}/wait?timeoutSec=20`);
    expect(res.body.status).toBe("exited");
  }
});

async function page(query: string): Promise<Page> {
  const res = await api.request<Page>("GET", `/v1/sessions?${query}`);
  expect({ query, status: res.status }).toEqual({ query, status: 200 });
  expect(Object.keys(res.body).sort()).toEqual(["nextCursor", "sessions"]);
  return res.body;
}

/** Every page of `query` with `limit`, following nextCursor until it is null. */
async function pages(query: string, limit: number): Promise<Page[]> {
  const out: Page[] = [];
  let cursor: string | null = null;
  do {
    const parts = [query, `limit=${limit}`, cursor === null ? "" : `cursor=${encodeURIComponent(cursor)}`];
    const next: Page = await page(parts.filter((part) => part !== "").join("&"));
    out.push(next);
    if (next.nextCursor !== null) expect(typeof next.nextCursor).toBe("string");
    cursor = next.nextCursor;
    if (out.length > 1000) throw new Error("nextCursor never became null");
  } while (cursor !== null);
  return out;
}

describe("GET /v1/sessions paging", () => {
  it("lists 23 tagged sessions 10 at a time: 10, 10, 3, each once, in creation order, nextCursor null at the end", async () => {
    const got = await pages(`tag=${TAG}`, 10);
    expect(got.map((p) => p.sessions.length)).toEqual([10, 10, 3]);
    expect(got.map((p) => p.nextCursor === null)).toEqual([false, false, true]);
    expect(got.flatMap((p) => p.sessions.map((s) => s.id))).toEqual(ids);
    for (const s of got.flatMap((p) => p.sessions)) expect(s.tags).toEqual([TAG]);

    // The same with a status filter too.
    const exited = await pages(`tag=${TAG}&status=exited`, 10);
    expect(exited.map((p) => p.sessions.length)).toEqual([10, 10, 3]);
    expect(exited.flatMap((p) => p.sessions.map((s) => s.id))).toEqual(ids);
    const running = await page(`tag=${TAG}&status=running&limit=10`);
    expect(running).toEqual({ sessions: [], nextCursor: null });
  });

  it("pages the whole tenant without losing or repeating one", async () => {
    const got = await pages("", 10);
    for (const p of got.slice(0, -1)) expect(p.sessions).toHaveLength(10);
    expect(got.at(-1)?.sessions.length).toBeGreaterThan(0);
    expect(got.at(-1)?.sessions.length).toBeLessThanOrEqual(10);
    const all = got.flatMap((p) => p.sessions.map((s) => s.id));
    expect(new Set(all).size).toBe(all.length);
    expect(all.filter((id) => id.startsWith(`${TAG}-`))).toEqual(ids);
    // In creation order throughout.
    const created = got.flatMap((p) => p.sessions.map((s) => Date.parse(s.createdAt)));
    expect([...created].sort((a, b) => a - b)).toEqual(created);
  });

  it("defaults to 100, takes 1 and 1000", async () => {
    const whole = await page(`tag=${TAG}`);
    expect(whole.sessions.map((s) => s.id)).toEqual(ids);
    expect(whole.nextCursor).toBeNull();
    const big = await page(`tag=${TAG}&limit=1000`);
    expect(big.sessions.map((s) => s.id)).toEqual(ids);
    expect(big.nextCursor).toBeNull();
    const ones = await pages(`tag=${TAG}`, 1);
    expect(ones).toHaveLength(COUNT);
    expect(ones.flatMap((p) => p.sessions.map((s) => s.id))).toEqual(ids);
    // The last full page of an exact fit may or may not say there is more; it never repeats one.
    const exact = await pages(`tag=${TAG}`, COUNT);
    expect(exact.flatMap((p) => p.sessions.map((s) => s.id))).toEqual(ids);
  });

  it("answers 400 to a bad limit or cursor", async () => {
    for (const query of ["limit=0", "limit=1001", "limit=-1", "limit=abc", "limit=1.5", `cursor=${encodeURIComponent("!@#$%^")}`]) {
      const res = await api.request("GET", `/v1/sessions?tag=${TAG}&${query}`);
      expect({ query, status: res.status, code: (res.body as any)?.error?.code }).toEqual({
        query,
        status: 400,
        code: "INVALID_REQUEST",
      });
    }
  });
});
