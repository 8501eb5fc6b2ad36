// Pure logic of Pty's offset handling, with a scripted socket standing in for the server. The
// real stack runs the same paths in test/sdk.test.ts; what only a scripted server can do here
// is resend bytes a client already has, which the real one never does.
import { describe, expect, it } from "vitest";
import { encodeNumberedInput } from "../shared/protocol.js";
import { Pty } from "./pty.js";
import { noAgentCalls, ScriptedSocket } from "./pty.test-kit.js";
import type { PtyTransport } from "./pty-types.js";

/** A REST call the Pty made through its transport. */
type RestCall = [method: string, path: string, body?: unknown];

function scripted() {
  const sockets: ScriptedSocket[] = [];
  const restCalls: RestCall[] = [];
  const transport: PtyTransport = {
    openSocket: async (_id, query) => {
      const socket = new ScriptedSocket(query);
      sockets.push(socket);
      return socket;
    },
    // Answers nothing useful: the tests look at which calls were made.
    rest: async <T>(method: string, path: string, body?: unknown) => {
      restCalls.push([method, path, body]);
      return {} as T;
    },
    recording: async (id, range) => {
      restCalls.push(["GET", `recording ${id}`, range]);
      return "cast";
    },
    calls: noAgentCalls(),
  };
  return { sockets, transport, restCalls };
}

async function attached(options: ConstructorParameters<typeof Pty>[3] = {}) {
  const { sockets, transport, restCalls } = scripted();
  const pty = new Pty("s", transport, false, { reconnect: { baseMs: 1, maxMs: 2 }, ...options });
  const received: [string, number][] = [];
  pty.on("data", (bytes, offset) => received.push([new TextDecoder().decode(bytes), offset]));
  const ready = pty.connected();
  await until(() => sockets.length === 1);
  sockets[0].open();
  await ready;
  // Frames after hello are held for one macrotask (see the test below); later ones flow at once.
  await new Promise((resolve) => setTimeout(resolve, 0));
  return { pty, sockets, received, restCalls };
}

/** Waits for `check`, always past the microtasks now queued: a socket reaches the Pty some promise turns after it is made. */
async function until(check: () => boolean): Promise<void> {
  await new Promise((r) => setTimeout(r, 0));
  for (let i = 0; i < 200 && !check(); i++) await new Promise((r) => setTimeout(r, 1));
  expect(check()).toBe(true);
}

describe("Pty offsets", () => {
  it("delivers each byte once: drops repeated frames and trims overlapping ones", async () => {
    const { pty, sockets, received } = await attached();
    const socket = sockets[0];
    socket.json({ type: "replay", from: 0, to: 6 });
    socket.output(0, "abc");
    socket.output(0, "abc"); // repeated whole
    socket.output(1, "bcdef"); // overlaps by two
    socket.json({ type: "live", offset: 6 });
    socket.output(6, "g");
    expect(received).toEqual([
      ["abc", 0],
      ["def", 3],
      ["g", 6],
    ]);
    expect(pty.offset).toBe(7);
    pty.close();
  });

  it("holds frames that came with hello until the caller has attached its listeners", async () => {
    const { sockets, transport } = scripted();
    const pty = new Pty("s", transport, false, {});
    const ready = pty.connected();
    await until(() => sockets.length === 1);
    // hello and output in one synchronous run, as ws delivers the frames of one read.
    sockets[0].open();
    sockets[0].output(0, "in the same read");
    await ready;
    const got: string[] = [];
    pty.on("data", (bytes) => got.push(new TextDecoder().decode(bytes)));
    await until(() => got.length === 1);
    expect(got).toEqual(["in the same read"]);
    pty.close();
  });

  it("reconnects from the next offset after a drop and acknowledges it first", async () => {
    const { pty, sockets, received } = await attached();
    const states: string[] = [];
    pty.on("state", (s) => states.push(s));
    sockets[0].output(0, "hello");
    sockets[0].close(1006);
    await until(() => sockets.length === 2);
    expect(sockets[1].from).toBe("5");
    sockets[1].open();
    expect(sockets[1].sent[0]).toBe(JSON.stringify({ type: "ack", offset: 5 }));
    sockets[1].output(3, "lo world"); // the server may start earlier: only new bytes pass
    expect(received).toEqual([
      ["hello", 0],
      [" world", 5],
    ]);
    expect(states).toEqual(["reconnecting", "open"]);
    pty.close();
  });

  it("reports a gap and moves past it", async () => {
    const { pty, sockets, received } = await attached({ from: 0 });
    const gaps: unknown[] = [];
    pty.on("gap", (g) => gaps.push(g));
    sockets[0].json({ type: "gap", from: 0, to: 100 });
    sockets[0].output(100, "x");
    expect(gaps).toEqual([{ from: 0, to: 100 }]);
    expect(received).toEqual([["x", 100]]);
    pty.close();
  });

  it("ends on 4010 after exit, and on 4004 with NOT_FOUND, without reconnecting", async () => {
    const a = await attached();
    a.sockets[0].json({ type: "exit", status: "exited", exitCode: 2, signal: null, reason: "exit", offset: 0 });
    a.sockets[0].close(4010);
    expect(a.pty.state).toBe("closed");
    expect(await a.pty.wait()).toEqual({ status: "exited", exitCode: 2, signal: null, reason: "exit", offset: 0 });

    const b = await attached();
    const errors: string[] = [];
    b.pty.on("error", (e) => errors.push(e.code));
    b.sockets[0].close(4004, "no such session");
    expect(b.pty.state).toBe("closed");
    expect(errors).toEqual(["NOT_FOUND"]);
    expect(b.sockets).toHaveLength(1);
  });

  it("hands output that arrived before iteration began to the first iterator", async () => {
    const { pty, sockets } = await attached();
    sockets[0].output(0, "early ");
    sockets[0].output(6, "late");
    sockets[0].json({ type: "exit", status: "exited", exitCode: 0, signal: null, offset: 0 });
    sockets[0].close(4010);
    const chunks: string[] = [];
    for await (const chunk of pty) chunks.push(new TextDecoder().decode(chunk));
    expect(chunks.join("")).toBe("early late");
  });
});

describe("Pty screens and commands", () => {
  const decode = (bytes: Uint8Array) => new TextDecoder().decode(bytes);

  it("from=screen: the repaint as a screen event, then output from its offset; a drop resumes by offset", async () => {
    const { pty, sockets, received } = await attached({ from: "screen", onLag: "screen" });
    expect(sockets[0].query).toEqual({ from: "screen", onLag: "screen", compress: "deflate", writer: expect.stringMatching(/^[\w-]{22}$/), inputFrom: 0 });
    const screens: [string, number, number, number][] = [];
    pty.on("screen", ({ offset, cols, rows, data }) => screens.push([decode(data), offset, cols, rows]));
    sockets[0].screen(5000, 100, 30, "\x1b[Hpainted");
    // the edge replays from the screen's offset, then goes live
    sockets[0].json({ type: "replay", from: 5000, to: 5003 });
    sockets[0].output(5000, "abc");
    sockets[0].json({ type: "live", offset: 5003 });
    expect(screens).toEqual([["\x1b[Hpainted", 5000, 100, 30]]);
    expect(received).toEqual([["abc", 5000]]);
    expect(pty.session?.cols).toBe(100);
    // acknowledged at once: the edge counts the client's lag from the screen's offset
    expect(sockets[0].sent).toContain(JSON.stringify({ type: "ack", offset: 5000 }));
    sockets[0].close(1006);
    await until(() => sockets.length === 2);
    // The same writer: its input's count goes on across the reconnect.
    expect(sockets[1].query).toEqual({ from: "5003", onLag: "screen", compress: "deflate", writer: sockets[0].query.writer, inputFrom: 0 });
    pty.close();
  });

  it("a drop before the screen came asks for the screen again", async () => {
    const { pty, sockets } = await attached({ from: "screen" });
    sockets[0].close(1006);
    await until(() => sockets.length === 2);
    expect(sockets[1].from).toBe("screen");
    pty.close();
  });

  it("onLag=screen: gap for what was skipped, the screen, then live output; no data twice", async () => {
    const { pty, sockets, received } = await attached({ onLag: "screen" });
    const events: unknown[] = [];
    pty.on("gap", (gap) => events.push(["gap", gap]));
    pty.on("screen", ({ offset, data }) => events.push(["screen", offset, decode(data)]));
    sockets[0].output(0, "hello");
    sockets[0].json({ type: "gap", from: 5, to: 9000 });
    sockets[0].screen(9000, 80, 24, "now");
    sockets[0].output(9000, "!");
    expect(events).toEqual([
      ["gap", { from: 5, to: 9000 }],
      ["screen", 9000, "now"],
    ]);
    expect(received).toEqual([
      ["hello", 0],
      ["!", 9000],
    ]);
    expect(pty.offset).toBe(9001);
    pty.close();
  });

  it("a screen past what was delivered without a gap message reports the gap itself", async () => {
    const { pty, sockets } = await attached({ from: 0 });
    const gaps: unknown[] = [];
    pty.on("gap", (gap) => gaps.push(gap));
    sockets[0].output(0, "ab");
    sockets[0].screen(10, 80, 24, "x");
    expect(gaps).toEqual([{ from: 2, to: 10 }]);
    pty.close();
  });

  it("onScreen listens from the first frame, held with hello like output", async () => {
    const { sockets, transport } = scripted();
    const screens: number[] = [];
    const pty = new Pty("s", transport, false, { from: "screen", onScreen: ({ offset }) => screens.push(offset) });
    const ready = pty.connected();
    await until(() => sockets.length === 1);
    sockets[0].open();
    sockets[0].screen(42, 80, 24, "x");
    await ready;
    await until(() => screens.length === 1);
    expect(screens).toEqual([42]);
    pty.close();
  });

  it("emits command messages as command events", async () => {
    const { pty, sockets } = await attached();
    const commands: unknown[] = [];
    pty.on("command", (c) => commands.push(c));
    sockets[0].json({ type: "command", seq: 3, command: "ls", exitCode: 0, from: 10, to: 20 });
    expect(commands).toEqual([{ seq: 3, command: "ls", exitCode: 0, from: 10, to: 20 }]);
    pty.close();
  });

  it("a viewer's terminal refuses input and run locally", async () => {
    const { transport } = scripted();
    const pty = new Pty("s", transport, true, {});
    await expect(pty.input("x")).rejects.toThrow(/viewer/);
    await expect(pty.run("ls")).rejects.toThrow(/viewer/);
  });
});

describe("Pty without a terminal (pty: false)", () => {
  const decode = (bytes: Uint8Array) => new TextDecoder().decode(bytes);

  it("0x03 frames are stderr events, 0x01 data events, in one offset space; onStdout and onStderr get them", async () => {
    const viaOptions: string[] = [];
    const { pty, sockets, received } = await attached({
      onStdout: (bytes, offset) => viaOptions.push(`out ${offset} ${decode(bytes)}`),
      onStderr: (bytes, offset) => viaOptions.push(`err ${offset} ${decode(bytes)}`),
    });
    const errors: [string, number][] = [];
    pty.on("stderr", (bytes, offset) => errors.push([decode(bytes), offset]));
    sockets[0].output(0, "out1\n");
    sockets[0].stderr(5, "err1\n");
    sockets[0].output(10, "out2\n");
    expect(received).toEqual([
      ["out1\n", 0],
      ["out2\n", 10],
    ]);
    expect(errors).toEqual([["err1\n", 5]]);
    expect(viaOptions).toEqual(["out 0 out1\n", "err 5 err1\n", "out 10 out2\n"]);
    expect(pty.offset).toBe(15);
    pty.close();
  });

  it("a reconnect resumes after the last byte of either stream: a replayed stderr frame is trimmed, none is seen twice", async () => {
    const { pty, sockets, received } = await attached();
    const errors: [string, number][] = [];
    pty.on("stderr", (bytes, offset) => errors.push([decode(bytes), offset]));
    sockets[0].output(0, "ab");
    sockets[0].stderr(2, "cd");
    sockets[0].close(1006);
    await until(() => sockets.length === 2);
    expect(sockets[1].from).toBe("4");
    sockets[1].open();
    // a server that starts earlier than asked: only the bytes past 4 pass, each on its stream
    sockets[1].output(0, "ab");
    sockets[1].stderr(2, "cdef");
    sockets[1].output(6, "g");
    expect(received).toEqual([
      ["ab", 0],
      ["g", 6],
    ]);
    expect(errors).toEqual([
      ["cd", 2],
      ["ef", 4],
    ]);
    pty.close();
  });

  it("the async iterator yields stdout only (stderr is its own event)", async () => {
    const { pty, sockets } = await attached();
    sockets[0].output(0, "out ");
    sockets[0].stderr(4, "err ");
    sockets[0].output(8, "more");
    sockets[0].json({ type: "exit", status: "exited", exitCode: 0, signal: null, reason: "exit", offset: 12 });
    sockets[0].close(4010);
    const chunks: string[] = [];
    for await (const chunk of pty) chunks.push(decode(chunk));
    expect(chunks.join("")).toBe("out more");
  });

  it('closeStdin: {"type":"eof"} after the input sent before it while attached; POST input {eof: true} when not', async () => {
    const { pty, sockets, restCalls } = await attached();
    const typed = pty.sendInput("abc");
    const closing = pty.closeStdin();
    // eof waits until the process has what was typed before it.
    expect(sockets[0].sent.slice(1)).toEqual([encodeNumberedInput(0, new TextEncoder().encode("abc"))]);
    sockets[0].json({ type: "input_ack", offset: 3 });
    await typed;
    await closing;
    const sent = sockets[0].sent.slice(1); // after the first ack
    expect(sent).toEqual([encodeNumberedInput(0, new TextEncoder().encode("abc")), JSON.stringify({ type: "eof" })]);
    expect(restCalls).toEqual([]);

    sockets[0].readyState = 3; // dropped, not yet noticed: the socket cannot carry it
    await pty.closeStdin();
    expect(restCalls).toEqual([["POST", "/v1/sessions/s/input", { data: "", eof: true }]]);
    expect(sockets[0].sent.slice(1)).toEqual(sent);
    pty.close();
  });

  it("a viewer's terminal refuses closeStdin locally", async () => {
    const { transport, restCalls } = scripted();
    const pty = new Pty("s", transport, true, {});
    await expect(pty.closeStdin()).rejects.toMatchObject({ code: "FORBIDDEN" });
    expect(restCalls).toEqual([]);
  });

  it("recording() asks for this session's recording with its range", async () => {
    const { transport, restCalls } = scripted();
    const pty = new Pty("s", transport, true, {});
    expect(await pty.recording({ from: 3, to: 9 })).toBe("cast");
    expect(restCalls).toEqual([["GET", "recording s", { from: 3, to: 9 }]]);
  });
});
