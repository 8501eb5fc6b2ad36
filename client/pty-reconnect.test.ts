// Pure logic of a Pty's connection (pty.ts, pty-socket.ts) with scripted sockets standing in for
// the server: `onState` from the first state, a nudge (`reconnectNow`) that redials at once or
// checks an open socket, an attempt whose `open()` never settles (and the base delay after it), and the HTTP status of a
// refusal heard as a close code. The real stack runs the same paths in
// test/reconnect-deadlines.test.ts and test/sdk-errors.test.ts.
import { describe, expect, it, vi } from "vitest";
import { encodeOutput, PING_TEXT } from "../shared/protocol.js";
import { PtyBrokerError } from "./errors.js";
import { Pty } from "./pty.js";
import { noAgentCalls, ScriptedSocket } from "./pty.test-kit.js";
import type { ConnectionState, ConnectOptions, PtyTransport, SocketLike } from "./pty-types.js";

/** A Pty whose sockets are scripted; `hang` makes the next `openSocket` calls never settle until released. */
function scripted(options: ConnectOptions) {
  const sockets: ScriptedSocket[] = [];
  const pending: { socket: ScriptedSocket; settle: () => void }[] = [];
  let hang = false;
  const transport: PtyTransport = {
    openSocket: (_id, query) => {
      const socket = new ScriptedSocket(query);
      if (hang) return new Promise((resolve) => pending.push({ socket, settle: () => resolve(socket) }));
      sockets.push(socket);
      return Promise.resolve(socket);
    },
    rest: async <T>() => ({}) as T,
    recording: async () => "",
    calls: noAgentCalls(),
  };
  const states: ConnectionState[] = [];
  const pty = new Pty("s", transport, false, { onState: (state) => states.push(state), ...options });
  return {
    pty,
    sockets,
    states,
    hang: (on: boolean) => (hang = on),
    /** Settles the attempts left hanging, handing each its socket late. */
    release: () =>
      pending.splice(0).map(({ socket, settle }) => {
        settle();
        return socket;
      }),
  };
}

/** Waits for `check`, always past the microtasks now queued: a socket is handed to the Pty a few promise turns after it is made. */
async function until(check: () => boolean): Promise<void> {
  await new Promise((r) => setTimeout(r, 0));
  for (let i = 0; i < 500 && !check(); i++) await new Promise((r) => setTimeout(r, 1));
  expect(check()).toBe(true);
}

describe("Pty connection", () => {
  it("onState hears every state from the first: connecting, open, reconnecting, open, closed", async () => {
    const { pty, sockets, states } = scripted({ reconnect: { baseMs: 1, maxMs: 2 } });
    const ready = pty.connected();
    expect(states).toEqual(["connecting"]);
    await until(() => sockets.length === 1);
    sockets[0].open();
    await ready;
    sockets[0].close(1006);
    await until(() => sockets.length === 2);
    sockets[1].open();
    pty.close();
    expect(states).toEqual(["connecting", "open", "reconnecting", "open", "closed"]);
  });

  it("reconnectNow while waiting for the backoff dials at once, from the next offset", async () => {
    // A backoff of a minute: only the nudge can redial within the test.
    const { pty, sockets, states } = scripted({ reconnect: { baseMs: 60_000, maxMs: 60_000 } });
    const ready = pty.connected();
    await until(() => sockets.length === 1);
    sockets[0].open();
    await ready;
    sockets[0].json({ type: "live", offset: 0 });
    const frame = encodeOutput(0, new TextEncoder().encode("abc"));
    sockets[0].onmessage?.({ data: frame.buffer.slice(frame.byteOffset, frame.byteOffset + frame.byteLength) });
    sockets[0].close(1006);
    await until(() => pty.state === "reconnecting");
    expect(sockets).toHaveLength(1);
    pty.reconnectNow();
    await until(() => sockets.length === 2);
    expect(sockets[1].query.from).toBe("3");
    sockets[1].open();
    expect(states.at(-1)).toBe("open");
    pty.close();
  });

  it("reconnectNow on an open socket pings it: an answer keeps it, silence gives it up and redials", async () => {
    // The probe waits for the heartbeat's interval when it is shorter than 2 s; the heartbeat's own check (two intervals) comes later.
    const { pty, sockets } = scripted({ heartbeatMs: 40, reconnect: { baseMs: 1, maxMs: 2 } });
    const ready = pty.connected();
    await until(() => sockets.length === 1);
    sockets[0].open();
    await ready;
    const pings = () => sockets[0].sent.filter((data) => data === PING_TEXT).length;

    pty.reconnectNow();
    expect(pings()).toBe(1);
    sockets[0].json({ type: "pong" });
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(sockets).toHaveLength(1);

    pty.reconnectNow();
    await until(() => sockets.length === 2);
    expect(sockets[0].closedWith).toBe(4000);
    expect(pty.state).toBe("reconnecting");
    pty.close();
  });

  it("an attempt whose open() never settles is given up after openTimeoutMs and made again; the late socket is closed", async () => {
    const { pty, sockets, hang, release } = scripted({ openTimeoutMs: 20, reconnect: { baseMs: 1, maxMs: 2 } });
    hang(true);
    const ready = pty.connected();
    await new Promise((resolve) => setTimeout(resolve, 60)); // at least one attempt has timed out
    hang(false);
    await until(() => sockets.length === 1);
    const late = release();
    expect(late.length).toBeGreaterThan(0);
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect(late.every((socket) => socket.closedWith === 1000)).toBe(true);
    sockets[0].open();
    await ready;
    expect(pty.state).toBe("open");
    pty.close();
  });

  it("after an attempt that used up openTimeoutMs, the next goes within the base delay, however far the backoff had grown", async () => {
    vi.useFakeTimers();
    vi.spyOn(Math, "random").mockReturnValue(1); // every backoff delay is its ceiling
    try {
      const opens: number[] = [];
      let hang = false;
      const transport: PtyTransport = {
        openSocket: () => {
          opens.push(Date.now());
          // Refused at once (the backoff grows), or, once `hang`, an attempt on a silent network.
          return hang ? new Promise<SocketLike>(() => undefined) : Promise.reject(new PtyBrokerError("NETWORK", "refused"));
        },
        rest: async <T>() => ({}) as T,
        recording: async () => "",
        calls: noAgentCalls(),
      };
      const pty = new Pty("s", transport, false, { openTimeoutMs: 1000, reconnect: { baseMs: 100, maxMs: 60_000 }, connectTimeoutMs: 600_000 });
      void pty.connected();
      // Eight refusals: the ceiling is now 100 ms · 2^8 = 25.6 s.
      while (opens.length < 8) await vi.advanceTimersByTimeAsync(100);
      hang = true;
      const grownAt = opens[7];
      while (opens.length < 9) await vi.advanceTimersByTimeAsync(100); // the next waits the grown backoff...
      const hungAt = opens[8];
      expect(hungAt - grownAt).toBe(100 * 2 ** 7);
      // ...uses up its deadline, and the one after it starts within the base delay (100 ms).
      await vi.advanceTimersByTimeAsync(hungAt + 1000 + 100 - Date.now());
      expect(opens.length).toBe(10);
      expect(opens[9] - hungAt).toBe(1000 + 100);
      pty.close();
    } finally {
      vi.useRealTimers();
      vi.restoreAllMocks();
    }
  });

  it("a refusal heard as close 4004 is NOT_FOUND with the status 404", async () => {
    const { pty, sockets } = scripted({});
    const ready = pty.connected();
    await until(() => sockets.length === 1);
    sockets[0].readyState = 1;
    sockets[0].onopen?.({});
    sockets[0].close(4004, "no such session");
    await expect(ready).rejects.toMatchObject({ code: "NOT_FOUND", status: 404, message: "no such session" });
  });
});
