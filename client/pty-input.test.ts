// A Pty's numbered input (pty-input.ts) against a scripted socket: what it sends, when it sends
// it again, and when sendInput settles. The real stack runs the same paths in test/input-once.
import { describe, expect, it } from "vitest";
import { decodeFrame } from "../shared/protocol.js";
import { Pty } from "./pty.js";
import { noAgentCalls, ScriptedSocket } from "./pty.test-kit.js";
import type { PtyTransport } from "./pty-types.js";

async function attached(options: ConstructorParameters<typeof Pty>[3] = {}) {
  const sockets: ScriptedSocket[] = [];
  const transport: PtyTransport = {
    openSocket: async (_id, query) => {
      const socket = new ScriptedSocket(query);
      sockets.push(socket);
      return socket;
    },
    rest: async <T>() => ({}) as T,
    recording: async () => "",
    calls: noAgentCalls(),
  };
  const pty = new Pty("s", transport, false, { reconnect: { baseMs: 1, maxMs: 2 }, ...options });
  const ready = pty.connected();
  await until(() => sockets.length === 1);
  sockets[0].open();
  await ready;
  return { pty, sockets };
}

/** The numbered input frames a socket carried, as [offset, text]. */
function numbered(socket: ScriptedSocket): [number, string][] {
  return socket.sent.flatMap((sent) => {
    if (typeof sent === "string") return [];
    const frame = decodeFrame(sent);
    return frame.op === "numberedInput" ? [[frame.offset, new TextDecoder().decode(frame.data)] as [number, string]] : [];
  });
}

/** Settles: "resolved", the rejection's code, or "pending". */
async function settled(promise: Promise<void>): Promise<string> {
  const state = await Promise.race([
    promise.then(
      () => "resolved",
      (error: { code?: string }) => error.code ?? "rejected",
    ),
    new Promise<string>((resolve) => setTimeout(() => resolve("pending"), 5)),
  ]);
  return state;
}

async function until(check: () => boolean): Promise<void> {
  await new Promise((r) => setTimeout(r, 0));
  for (let i = 0; i < 1500 && !check(); i++) await new Promise((r) => setTimeout(r, 2));
  expect(check()).toBe(true);
}

describe("Pty numbered input", () => {
  it("numbers input from 0 under one writer id, and resolves each sendInput at its ack", async () => {
    const { pty, sockets } = await attached();
    expect(sockets[0].query.writer).toMatch(/^[\w-]{22}$/);
    const first = pty.sendInput("ab");
    const second = pty.sendInput("cde");
    expect(numbered(sockets[0])).toEqual([
      [0, "ab"],
      [2, "cde"],
    ]);
    expect(pty.pendingInput).toBe(5);
    sockets[0].json({ type: "input_ack", offset: 2 });
    expect(await settled(first)).toBe("resolved");
    expect(await settled(second)).toBe("pending");
    expect(new TextDecoder().decode(pty.pendingInputBytes())).toBe("cde");
    sockets[0].json({ type: "input_ack", offset: 5 });
    expect(await settled(second)).toBe("resolved");
    expect(pty.pendingInput).toBe(0);
    pty.close();
  });

  it("keeps what is typed while the socket is down and sends the unacknowledged rest after hello, from the edge's acked", async () => {
    const { pty, sockets } = await attached();
    const typed = pty.sendInput("echo early-");
    sockets[0].json({ type: "input_ack", offset: 3 });
    await until(() => pty.pendingInput === 8);
    sockets[0].close(1006);
    const later = pty.sendInput("late\r");
    await until(() => sockets.length === 2);
    // The same writer, saying what it had acknowledged (a runner that forgot it starts there).
    expect(sockets[1].query.writer).toBe(sockets[0].query.writer);
    expect(sockets[1].query.inputFrom).toBe(3);
    // The edge says the process has the first 5 bytes: the rest goes, once, from there.
    sockets[1].readyState = 1;
    sockets[1].onopen?.({});
    sockets[1].json({ type: "hello", session: { id: "s" }, input: { writer: sockets[0].query.writer, acked: 5 } });
    expect(numbered(sockets[1])).toEqual([
      [5, "early-"],
      [11, "late\r"],
    ]);
    sockets[1].json({ type: "input_ack", offset: 16 });
    expect(await settled(typed)).toBe("resolved");
    expect(await settled(later)).toBe("resolved");
    pty.close();
  });

  it("sends nothing between a drop and the next hello: a key typed from the `open` listener follows the resend, in order", async () => {
    const { pty, sockets } = await attached();
    pty.sendInput("ab").catch(() => undefined); // rejected by the close at the end
    sockets[0].json({ type: "input_ack", offset: 1 });
    await until(() => pty.pendingInput === 1);
    sockets[0].close(1006);
    let typedOnOpen: Promise<void> | undefined;
    pty.on("state", (state) => {
      if (state === "open") typedOnOpen = pty.sendInput("c");
    });
    await until(() => sockets.length === 2);
    sockets[1].open();
    await until(() => typedOnOpen !== undefined && numbered(sockets[1]).length >= 2);
    expect(numbered(sockets[1])).toEqual([
      [1, "b"],
      [2, "c"],
    ]);
    typedOnOpen?.catch(() => undefined);
    pty.close();
  });

  it("sends again from where the runner asks (a hole), and after a retryable refusal, by its timer", async () => {
    const { pty, sockets } = await attached();
    const typed = pty.sendInput("abcdef");
    sockets[0].sent.length = 0;
    // A resend ask is no acknowledgement: nothing settles, and the bytes from 2 go again.
    sockets[0].json({ type: "input_ack", offset: 2, resend: true });
    await until(() => numbered(sockets[0]).length > 0);
    expect(numbered(sockets[0])).toEqual([[2, "cdef"]]);
    expect(await settled(typed)).toBe("pending");
    expect(pty.pendingInput).toBe(6);
    sockets[0].sent.length = 0;
    sockets[0].json({ type: "input_refused", offset: 2, code: "CONFLICT", message: "session is not connected to a runner right now" });
    expect(await settled(typed)).toBe("pending");
    expect(numbered(sockets[0])).toEqual([]);
    // Nothing acknowledged for a second: everything not acknowledged goes again.
    await until(() => numbered(sockets[0]).length > 0);
    expect(numbered(sockets[0])).toEqual([[0, "abcdef"]]);
    typed.catch(() => undefined);
    pty.close();
  });

  it("a final refusal (by its code, or marked final) rejects what waits; the exit rejects what is pending and what comes", async () => {
    const refusing = await attached();
    const typed = refusing.pty.sendInput("x");
    refusing.sockets[0].json({ type: "input_refused", offset: 0, code: "FORBIDDEN", message: "a viewer may not send input" });
    expect(await settled(typed)).toBe("FORBIDDEN");
    refusing.pty.close();

    const closedStdin = await attached();
    const afterEof = closedStdin.pty.sendInput("w");
    closedStdin.sockets[0].json({ type: "input_refused", offset: 0, code: "CONFLICT", message: "stdin is closed: eof was sent", final: true });
    expect(await settled(afterEof)).toBe("CONFLICT");
    closedStdin.pty.close();

    const { pty, sockets } = await attached();
    const pending = pty.sendInput("y");
    sockets[0].json({ type: "exit", status: "exited", exitCode: 0, signal: null, reason: "exit", offset: 0 });
    expect(await settled(pending)).toBe("SESSION_EXITED");
    expect(await settled(pty.sendInput("z"))).toBe("SESSION_EXITED");
    pty.close();
    const closed = await attached();
    const lost = closed.pty.sendInput("q");
    closed.pty.close();
    expect(await settled(lost)).toBe("CLOSED");
  });

  it("refuses input past inputQueueBytes at once, naming the bound, and takes it again once acknowledged", async () => {
    const { pty, sockets } = await attached({ inputQueueBytes: 8 });
    const held = pty.sendInput("12345678");
    await expect(pty.sendInput("9")).rejects.toMatchObject({ code: "QUOTA_EXCEEDED", message: expect.stringContaining("bound of 8 bytes") });
    expect(numbered(sockets[0])).toEqual([[0, "12345678"]]);
    sockets[0].json({ type: "input_ack", offset: 8 });
    expect(await settled(held)).toBe("resolved");
    pty.sendInput("9").catch(() => undefined); // rejected by the close below
    expect(numbered(sockets[0]).at(-1)).toEqual([8, "9"]);
    pty.close();
  });

  it("an ack for more than was typed, or an old one, moves nothing", async () => {
    const { pty, sockets } = await attached();
    const typed = pty.sendInput("ab");
    sockets[0].json({ type: "input_ack", offset: 9 });
    expect(await settled(typed)).toBe("pending");
    sockets[0].json({ type: "input_ack", offset: 2 });
    sockets[0].json({ type: "input_ack", offset: 1 });
    expect(await settled(typed)).toBe("resolved");
    expect(pty.pendingInput).toBe(0);
    pty.close();
  });
});
