// TenantEvents as pure logic over a store in memory, inside workerd: a resume's backlog is read
// from the store as the client takes it (never all at once), with a gap where ids were trimmed;
// a stream that stops reading live events is cut with the last id it took. The attack on the
// real stack is test/sse-bounds.test.ts.
import { describe, expect, it } from "vitest";
import { type EventStore, type StoredEvent, TenantEvents } from "./tenant-events.js";

const decoder = new TextDecoder();
const KiB = 1024;

/** Stored events in memory; `reads` counts the events handed out. */
function memoryStore(events: StoredEvent[]): EventStore & { events: StoredEvent[]; reads: number } {
  const store = {
    events,
    reads: 0,
    next: (seq: number) => {
      const found = store.events.find((e) => e.seq > seq);
      if (found) store.reads++;
      return found;
    },
    latest: () => store.events.at(-1)?.seq ?? 0,
  };
  return store;
}

function stored(seq: number, bytes = 10 * KiB): StoredEvent {
  return { seq, type: "session.updated", data: JSON.stringify({ seq, pad: "p".repeat(bytes) }) };
}

/** The SSE text of a stored event, as the stream sends it. */
const text = (e: StoredEvent) => `id: ${e.seq}\nevent: ${e.type}\ndata: ${e.data}\n\n`;

function reader(res: Response) {
  const r = (res.body as ReadableStream<Uint8Array>).getReader();
  return async (): Promise<string | null> => {
    const { done, value } = await r.read();
    return done ? null : decoder.decode(value);
  };
}

/** Reads whole events (pieces of one event joined) until `count` are read or the stream ends. */
async function events(next: () => Promise<string | null>, count: number): Promise<string[]> {
  const out: string[] = [];
  let partial = "";
  while (out.length < count) {
    const piece = await next();
    if (piece === null) break;
    partial += piece;
    if (partial.endsWith("\n\n")) {
      out.push(partial);
      partial = "";
    }
  }
  return out;
}

describe("TenantEvents", () => {
  it("reads a resume's backlog as the client takes it, a gap first where ids were trimmed, then live ones", async () => {
    const store = memoryStore(Array.from({ length: 300 }, (_, i) => stored(101 + i)));
    const tenant = new TenantEvents(() => 60_000, store);
    const next = reader(tenant.open(40, null));
    // Opened: only what half the bound holds has been read from the store, not 3 MB of backlog.
    expect(store.reads).toBeLessThanOrEqual(52);
    expect(await events(next, 2)).toEqual([": events\n\n", 'event: gap\ndata: {"from":41,"to":101}\n\n']);
    const backlog = await events(next, 300);
    expect(backlog).toEqual(store.events.map(text));
    const live = stored(401);
    store.events.push(live);
    tenant.publish(live);
    expect(await events(next, 1)).toEqual([text(live)]);
    expect(store.reads).toBe(300);
  });

  it("cuts a stream that stops reading live events past 1 MiB, naming the last id it took", async () => {
    const store = memoryStore([stored(1)]);
    const tenant = new TenantEvents(() => 60_000, store);
    const next = reader(tenant.open(null, null));
    expect(await events(next, 1)).toEqual([": events\n\n"]);
    const first = stored(2);
    store.events.push(first);
    tenant.publish(first);
    expect(await events(next, 1)).toEqual([text(first)]);
    // Unread: 10 KiB events until the queue would pass 1 MiB.
    for (let seq = 3; seq < 200; seq++) tenant.publish(stored(seq));
    expect(tenant.size).toBe(0);
    const rest = await events(next, 200);
    expect(rest.slice(0, -1)).toEqual([]);
    expect(rest.at(-1)).toBe(
      'event: cut\nid: 2\ndata: {"code":"SLOW_CONSUMER","message":"slow consumer: reconnect with Last-Event-ID","lastEventId":"2"}\n\n',
    );
    expect(await next()).toBe(null);
  });

  it("names the newest id as the resume point of a live-only stream cut before it took any", async () => {
    const store = memoryStore([stored(7)]);
    const tenant = new TenantEvents(() => 60_000, store);
    const res = tenant.open(null, null);
    for (let seq = 8; seq < 200; seq++) tenant.publish(stored(seq));
    // Its opening comment was still queued: dropped with the rest.
    const all = await events(reader(res), 300);
    expect(all).toHaveLength(1);
    expect(all[0]).toMatch(/^event: cut\nid: 7\ndata: .*"lastEventId":"7"/);
  });
});
