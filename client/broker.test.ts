// `from: "auto"`: where an attach starts (the screen for a large history), decided by one GET
// before the socket opens; and the connect URL's query. A scripted fetch and WebSocket stand in
// for the edge.
import { describe, expect, it } from "vitest";
import { autoStart, PtyBroker, SCREEN_START_BYTES } from "./broker.js";
import type { SocketLike } from "./pty-types.js";

describe("autoStart", () => {
  it("the screen once the retained history passes 256 KiB, else everything", () => {
    expect(autoStart({ offset: SCREEN_START_BYTES, retainedFrom: 0 })).toBeUndefined();
    expect(autoStart({ offset: SCREEN_START_BYTES + 1, retainedFrom: 0 })).toBe("screen");
    // what counts is what would be replayed: the retained part
    expect(autoStart({ offset: 50 << 20, retainedFrom: (50 << 20) - 1000 })).toBeUndefined();
  });
});

class FakeSocket implements SocketLike {
  static opened: FakeSocket[] = [];
  binaryType = "blob";
  readyState = 0;
  onopen: ((event: unknown) => void) | null = null;
  onmessage: ((event: { data: unknown }) => void) | null = null;
  onclose: ((event: { code: number; reason: string }) => void) | null = null;
  onerror: ((event: unknown) => void) | null = null;
  constructor(readonly url: string) {
    FakeSocket.opened.push(this);
    setTimeout(() => {
      this.readyState = 1;
      this.onopen?.({});
      this.onmessage?.({ data: JSON.stringify({ type: "hello", session: { id: "s", cols: 80, rows: 24 } }) });
    }, 0);
  }
  send(): void {}
  close(): void {
    this.readyState = 3;
  }
}

function brokerWith(session: { offset: number; retainedFrom: number }) {
  const gets: string[] = [];
  const broker = new PtyBroker({
    url: "http://broker.test",
    token: "t.e30.s", // a token: the socket carries it in the query, no writer token is minted
    WebSocket: FakeSocket,
    fetch: async (input) => {
      gets.push(String(input));
      return new Response(JSON.stringify({ id: "s", ...session }), { headers: { "content-type": "application/json" } });
    },
  });
  return { broker, gets };
}

describe("PtyBroker.connect", () => {
  it('from: "auto" asks for the session, then connects from the screen when its history is large', async () => {
    FakeSocket.opened = [];
    const large = brokerWith({ offset: 3 << 20, retainedFrom: 0 });
    const pty = await large.broker.connect("s", { from: "auto", onLag: "screen" });
    expect(large.gets).toEqual(["http://broker.test/v1/sessions/s"]);
    const url = new URL(FakeSocket.opened[0].url);
    expect(url.pathname).toBe("/v1/sessions/s/connect");
    expect(url.searchParams.get("from")).toBe("screen");
    expect(url.searchParams.get("onLag")).toBe("screen");
    pty.close();

    const small = brokerWith({ offset: 1000, retainedFrom: 0 });
    const again = await small.broker.connect("s", { from: "auto" });
    expect(new URL(FakeSocket.opened[1].url).searchParams.has("from")).toBe(false);
    expect(new URL(FakeSocket.opened[1].url).searchParams.has("onLag")).toBe(false);
    again.close();
  });

  it("an explicit from asks nothing first", async () => {
    FakeSocket.opened = [];
    const { broker, gets } = brokerWith({ offset: 3 << 20, retainedFrom: 0 });
    const pty = await broker.connect("s", { from: 0 });
    expect(gets).toEqual([]);
    expect(new URL(FakeSocket.opened[0].url).searchParams.get("from")).toBe("0");
    pty.close();
  });
});

/** A broker whose fetch answers `answer` and records each request (URL, method, JSON body). */
function recordingFetch(answer: () => Response) {
  const requests: { url: string; method: string; body: unknown }[] = [];
  const broker = new PtyBroker({
    url: "http://broker.test/",
    apiKey: "k",
    fetch: async (input, init) => {
      init?.signal?.throwIfAborted();
      requests.push({ url: String(input), method: init?.method ?? "GET", body: init?.body ? JSON.parse(String(init.body)) : undefined });
      return answer();
    },
  });
  return { broker, requests };
}

const json = (body: unknown, status = 200) => new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });

describe("PtyBroker.exec", () => {
  const result = { id: "e1", exitCode: 3, signal: null, stdout: "HELLO\n", stderr: "oops\n", truncated: false, durationMs: 12, timedOut: false };

  it("POSTs the command and its options to /v1/exec (the AbortSignal stays out of the body) and answers the result", async () => {
    const { broker, requests } = recordingFetch(() => json(result));
    const signal = new AbortController().signal;
    expect(await broker.exec("/bin/sh", { args: ["-c", "tr a-z A-Z"], stdin: "hello\n", timeoutSec: 5, maxOutputBytes: 100, signal })).toEqual(result);
    expect(requests).toEqual([
      {
        url: "http://broker.test/v1/exec",
        method: "POST",
        body: { command: "/bin/sh", args: ["-c", "tr a-z A-Z"], stdin: "hello\n", timeoutSec: 5, maxOutputBytes: 100 },
      },
    ]);
  });

  it("an aborted signal rejects with its reason, not as a network failure", async () => {
    const { broker } = recordingFetch(() => json(result));
    const stop = new AbortController();
    stop.abort(new Error("no longer wanted"));
    await expect(broker.exec("true", { signal: stop.signal })).rejects.toThrow("no longer wanted");
  });

  it("the API's refusals are PtyBrokerErrors with their code, status and Retry-After", async () => {
    const { broker } = recordingFetch(
      () => new Response(JSON.stringify({ error: { code: "QUOTA_EXCEEDED", message: "too many" } }), { status: 429, headers: { "retry-after": "7" } }),
    );
    await expect(broker.exec("true")).rejects.toMatchObject({ name: "PtyBrokerError", code: "QUOTA_EXCEEDED", status: 429, retryAfterSec: 7 });
  });
});

describe("PtyBroker recordings and streams", () => {
  const cast = '{"version":2,"width":80,"height":24,"timestamp":1}\n[0.5,"o","hi"]\n';

  it("recording() GETs .../recording with from and to, and answers the asciicast text", async () => {
    const { broker, requests } = recordingFetch(() => new Response(cast, { headers: { "content-type": "application/x-asciicast" } }));
    expect(await broker.recording("a b", { from: 0, to: 2 })).toBe(cast);
    expect(await broker.recording("s")).toBe(cast);
    expect(requests.map((r) => [r.method, r.url])).toEqual([
      ["GET", "http://broker.test/v1/sessions/a%20b/recording?from=0&to=2"],
      ["GET", "http://broker.test/v1/sessions/s/recording"],
    ]);
  });

  it("recordingResponse() hands over the body unread, to stream", async () => {
    const { broker } = recordingFetch(() => new Response(cast));
    const res = await broker.recordingResponse("s");
    expect(res.bodyUsed).toBe(false);
    expect(await res.text()).toBe(cast);
  });

  it("output({stream}) asks for one stream's bytes", async () => {
    const { broker, requests } = recordingFetch(() => new Response("oops\n", { headers: { "x-offset-from": "0", "x-offset-to": "9" } }));
    const range = await broker.output("s", { from: 0, stream: "stderr" });
    expect(requests[0].url).toBe("http://broker.test/v1/sessions/s/output?from=0&stream=stderr");
    expect(range).toEqual({ from: 0, to: 9, bytes: new TextEncoder().encode("oops\n") });
  });

  it("NOT_A_TTY from a resize of a session without a terminal is a typed error", async () => {
    const { broker } = recordingFetch(() => json({ error: { code: "NOT_A_TTY", message: "session s has no terminal" } }, 409));
    await expect(broker.resize("s", { cols: 100, rows: 30 })).rejects.toMatchObject({ code: "NOT_A_TTY", status: 409 });
  });
});
