// Output compressed once per chunk (deflate.ts), in workerd: one frame per chunk shared by its
// viewers, the plain frame when deflate would not shrink it, and a socket's messages in order
// while a chunk compresses.
import { describe, expect, it } from "vitest";
import { decodeFrame } from "../../shared/protocol.js";
import { DeflateOutbox, deflatedFrame } from "./deflate.js";

const bytes = (text: string) => new TextEncoder().encode(text);

async function inflate(data: Uint8Array): Promise<string> {
  const stream = new Blob([data]).stream().pipeThrough(new DecompressionStream("deflate-raw"));
  return new Response(stream).text();
}

describe("deflatedFrame", () => {
  it("makes one 0x06 frame per chunk, shared by every viewer of it, that inflates to the chunk", async () => {
    const chunk = bytes("line é€😀\r\n".repeat(200));
    const first = deflatedFrame(4096, chunk, "stdout");
    expect(deflatedFrame(4096, chunk, "stdout")).toBe(first); // the same promise: compressed once
    const frame = decodeFrame(await first);
    if (frame.op !== "deflated") throw new Error(frame.op);
    expect(frame).toMatchObject({ offset: 4096, stream: "stdout", length: chunk.byteLength });
    expect(frame.data.byteLength).toBeLessThan(chunk.byteLength / 10);
    expect(await inflate(frame.data)).toBe("line é€😀\r\n".repeat(200));
    // A part of a chunk (a viewer that holds its start already) is a chunk of its own.
    expect(deflatedFrame(4100, chunk.subarray(4), "stdout")).not.toBe(first);
  });

  it("sends incompressible bytes as the plain frame, never more bytes than it", async () => {
    const random = crypto.getRandomValues(new Uint8Array(4096));
    const frame = decodeFrame(await deflatedFrame(7, random, "stderr"));
    expect(frame).toEqual({ op: "stderr", offset: 7, data: random });
  });
});

describe("DeflateOutbox", () => {
  it("sends at once while nothing compresses, and after the frames still compressing otherwise", async () => {
    const sent: string[] = [];
    const outbox = new DeflateOutbox(
      (message) => sent.push(typeof message === "string" ? message : `frame ${new Uint8Array(message as ArrayBuffer)[0]}`),
      (code, reason) => sent.push(`close ${code} ${reason}`),
    );
    outbox.message("hello");
    expect(sent).toEqual(["hello"]);
    let release!: (frame: Uint8Array) => void;
    outbox.frame(new Promise<Uint8Array>((resolve) => (release = resolve)));
    outbox.frame(Promise.resolve(Uint8Array.from([6])));
    outbox.message("exit");
    outbox.closeAfter(4010, "session ended");
    await Promise.resolve();
    expect(sent).toEqual(["hello"]); // all behind the first frame
    release(Uint8Array.from([1]));
    await new Promise((resolve) => setTimeout(resolve, 0)); // one turn: every promise settled before it has run
    expect(sent).toEqual(["hello", "frame 1", "frame 6", "exit", "close 4010 session ended"]);
    expect(outbox.size).toBe(0);
  });
});
