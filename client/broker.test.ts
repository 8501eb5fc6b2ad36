// `from: "auto"`: where an attach starts (the screen for a large history), decided by one GET
// before the socket opens; and the connect URL's query. A scripted fetch and WebSocket stand in
// for the edge.
import { describe, expect, it } from "vitest";
import { autoStart, PtyBroker, SCREEN_START_BYTES } from "./broker.js";
import type { SocketLike } from "./pty.js";

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
