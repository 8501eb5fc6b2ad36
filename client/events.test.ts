// Pure logic of `broker.events()`: SSE text to events, and the resume bookkeeping (no repeats,
// gaps reported). The real stack runs the iterator through dropped connections in
// test/sdk.test.ts; here the server's misbehaviours it never shows (a repeat, a silent jump)
// can be written down.
import { describe, expect, it } from "vitest";
import { EventCursor, EventDecoder } from "./events.js";

const session = (id: string, status = "running") => ({ id, status });
const at = "2026-01-02T03:04:05.000Z";

function frame(id: number, type: string, sid: string, status = "running"): string {
  return `id: ${id}\nevent: ${type}\ndata: ${JSON.stringify({ type, session: session(sid, status), at })}\n\n`;
}

describe("EventDecoder", () => {
  const stream =
    ": keep-alive\n\n" +
    frame(7, "session.created", "a", "starting") +
    frame(8, "session.updated", "a") +
    ": keep-alive\n\n" +
    frame(9, "session.exited", "a", "exited") +
    frame(10, "session.deleted", "a", "exited");
  const expected = [
    { id: 7, type: "session.created", session: session("a", "starting"), at },
    { id: 8, type: "session.updated", session: session("a"), at },
    { id: 9, type: "session.exited", session: session("a", "exited"), at },
    { id: 10, type: "session.deleted", session: session("a", "exited"), at },
  ];

  it("yields the same events however the text is cut into chunks, CRLF included", () => {
    for (const text of [stream, stream.replaceAll("\n", "\r\n")]) {
      for (let cut = 0; cut <= text.length; cut++) {
        const decoder = new EventDecoder();
        const got = [...decoder.feed(text.slice(0, cut)), ...decoder.feed(text.slice(cut))];
        expect(got).toEqual(expected);
        expect(decoder.cursor.last).toBe(10);
      }
    }
  });

  it("drops a partial event left by a dropped connection, and what it already handed out", () => {
    const decoder = new EventDecoder();
    expect(decoder.feed(frame(7, "session.created", "a", "starting") + frame(8, "session.updated", "a").slice(0, 20))).toEqual([
      expected[0],
    ]);
    decoder.reset(); // reconnected with Last-Event-ID: 7; a server may still resend 7
    expect(decoder.feed(stream)).toEqual(expected.slice(1));
  });

  it("reports a server gap, then continues after it", () => {
    const decoder = new EventDecoder(3);
    const text = `event: gap\ndata: {"from":4,"to":9}\n\n` + frame(9, "session.exited", "a", "exited");
    expect(decoder.feed(text)).toEqual([{ type: "gap", from: 4, to: 9 }, expected[2]]);
  });

  it("refuses what it cannot hand out as documented: an event without an id, data that is not JSON", () => {
    expect(() => new EventDecoder().feed(`event: session.created\ndata: {}\n\n`)).toThrow(
      expect.objectContaining({ code: "INTERNAL", message: 'GET /v1/events: event "session.created" without a valid id (undefined)' }),
    );
    expect(() => new EventDecoder().feed(`id: 1\nevent: session.created\ndata: {oops\n\n`)).toThrow(
      expect.objectContaining({ code: "INTERNAL", message: "GET /v1/events: event 1's data is not JSON" }),
    );
  });
});

describe("EventCursor", () => {
  const message = (id: number, event = "session.updated") => ({
    id: String(id),
    event,
    data: JSON.stringify({ type: event, session: session("s"), at }),
  });

  it("hands out each id once: a repeat or an older id is dropped", () => {
    const cursor = new EventCursor(undefined);
    expect(cursor.take(message(5))).toHaveLength(1);
    expect(cursor.take(message(5))).toEqual([]);
    expect(cursor.take(message(4))).toEqual([]);
    expect(cursor.take(message(6)).map((e) => (e.type === "gap" ? e : e.id))).toEqual([6]);
    expect(cursor.last).toBe(6);
  });

  it("reports ids skipped without a gap notice as a gap", () => {
    const cursor = new EventCursor(10);
    expect(cursor.take(message(14))).toEqual([
      { type: "gap", from: 11, to: 14 },
      { id: 14, type: "session.updated", session: session("s"), at },
    ]);
  });

  it("takes a gap only for what was not handed out yet", () => {
    const cursor = new EventCursor(20);
    expect(cursor.take({ event: "gap", data: '{"from":5,"to":18}' })).toEqual([]);
    expect(cursor.last).toBe(20);
    expect(cursor.take({ event: "gap", data: '{"from":5,"to":30}' })).toEqual([{ type: "gap", from: 21, to: 30 }]);
    expect(cursor.last).toBe(29);
    expect(cursor.take(message(30))).toHaveLength(1);
  });

  it("moves past an event type it does not know, handing out nothing for it", () => {
    const cursor = new EventCursor(1);
    expect(cursor.take(message(2, "session.renamed"))).toEqual([]);
    expect(cursor.last).toBe(2);
    expect(cursor.take(message(3))).toHaveLength(1);
  });

  it("refuses an `after` that is not an event id", () => {
    expect(() => new EventCursor(-1)).toThrow(expect.objectContaining({ code: "INVALID_REQUEST" }));
    expect(() => new EventCursor(1.5)).toThrow(expect.objectContaining({ code: "INVALID_REQUEST" }));
  });
});
