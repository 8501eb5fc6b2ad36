// StatusLine alone: what it writes to a terminal (in place) and to a file (a line each), and its
// throttle. The CLI in a real terminal, through a silent drop, is test/cli-input-once.
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { StatusLine } from "./status-line.js";

function output(columns?: number) {
  const written: string[] = [];
  return { written, out: { columns, write: (text: string) => written.push(text) } };
}

describe("StatusLine", () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it("on a terminal, says the status again over itself while nothing was written after it", () => {
    const { written, out } = output(100);
    const status = new StatusLine(out, true);
    status.say("connection lost; reconnecting…");
    status.say("connection lost; reconnecting… 3 bytes typed");
    status.say("connection lost; reconnecting… 3 bytes typed"); // the same: nothing
    status.amend("reconnected after 1.0 s");
    expect(written).toEqual([
      "\r\n[ptybroker: connection lost; reconnecting…]\r\n",
      "\x1b[1A\r\x1b[J[ptybroker: connection lost; reconnecting… 3 bytes typed]\r\n",
      "\x1b[1A\r\x1b[J[ptybroker: reconnected after 1.0 s]\r\n",
    ]);
  });

  it("a status that wrapped is erased from its first row; after other output, or a note, the next goes on a new line and amend says nothing", () => {
    const { written, out } = output(20);
    const status = new StatusLine(out, true);
    status.say("x".repeat(30)); // 42 characters: three rows of 20
    status.say("short");
    expect(written[1]).toBe("\x1b[3A\r\x1b[J[ptybroker: short]\r\n");
    status.moved();
    status.amend("not said: the output after it says more");
    status.say("short");
    status.note("a note");
    status.say("after the note");
    expect(written.slice(2)).toEqual(["\r\n[ptybroker: short]\r\n", "\r\n[ptybroker: a note]\r\n", "\r\n[ptybroker: after the note]\r\n"]);
  });

  it("not on a terminal: every status and amendment on a line of its own", () => {
    const { written, out } = output();
    const status = new StatusLine(out, false);
    status.say("one");
    status.say("two");
    status.amend("three");
    expect(written).toEqual(["\r\n[ptybroker: one]\r\n", "\r\n[ptybroker: two]\r\n", "\r\n[ptybroker: three]\r\n"]);
  });

  it("sayLater: at most one status per 500 ms, the last word said when the interval ends; say and stop cancel it", () => {
    const { written, out } = output(100);
    const status = new StatusLine(out, false);
    let bytes = 1;
    const text = () => `${bytes} bytes`;
    status.sayLater(text); // nothing said before: now
    for (bytes = 2; bytes <= 9; bytes++) {
      vi.advanceTimersByTime(50);
      status.sayLater(text);
    }
    bytes = 9;
    expect(written).toEqual(["\r\n[ptybroker: 1 bytes]\r\n"]);
    vi.advanceTimersByTime(100); // 500 ms after the first
    expect(written.at(-1)).toBe("\r\n[ptybroker: 9 bytes]\r\n");
    status.sayLater(text); // put off: 9 bytes were just said
    status.say("reconnected");
    status.sayLater(() => "put off, then stopped");
    status.stop();
    vi.advanceTimersByTime(1000);
    bytes = 10;
    status.sayLater(text);
    vi.advanceTimersByTime(1000);
    expect(written.slice(1)).toEqual(["\r\n[ptybroker: 9 bytes]\r\n", "\r\n[ptybroker: reconnected]\r\n", "\r\n[ptybroker: 10 bytes]\r\n"]);
  });
});
