// The SDK's side of compressed output: 0x06 frames inflated with DecompressionStream, in order
// with everything else the socket said, and a bad stream reported without stopping the rest.
import { deflateRawSync } from "node:zlib";
import { describe, expect, it } from "vitest";
import { decodeFrame, encodeDeflated, encodeOutput } from "../shared/protocol.js";
import { InflatingInbox, inflateRaw } from "./pty-inflate.js";

const bytes = (text: string) => new TextEncoder().encode(text);
const buffer = (frame: Uint8Array) => frame.slice().buffer;

function deflatedFrame(offset: number, text: string, stream: "stdout" | "stderr" = "stdout"): ArrayBuffer {
  const raw = bytes(text);
  return buffer(encodeDeflated(offset, raw.byteLength, new Uint8Array(deflateRawSync(raw)), stream));
}

/** An inbox that records what it hands on (output frames as `offset:text`) and what failed. */
function recorder() {
  const got: string[] = [];
  const errors: string[] = [];
  let drained!: () => void;
  const idle = () => new Promise<void>((resolve) => (drained = resolve));
  const inbox = new InflatingInbox(
    (message) => {
      if (typeof message === "string") got.push(message);
      else {
        const frame = decodeFrame(new Uint8Array(message));
        if (frame.op === "output" || frame.op === "stderr") got.push(`${frame.op}@${frame.offset}:${new TextDecoder().decode(frame.data)}`);
        else got.push(frame.op);
      }
    },
    (error) => errors.push(error.message),
  );
  const settle = () => {
    const done = idle();
    inbox.whenDrained(() => drained());
    return done;
  };
  return { inbox, got, errors, settle };
}

describe("inflateRaw", () => {
  it("inflates what the edge deflated, to exactly the length the header names", async () => {
    const text = "line é€😀\r\n".repeat(500);
    const frame = decodeFrame(new Uint8Array(deflatedFrame(7, text)));
    if (frame.op !== "deflated") throw new Error(frame.op);
    expect(new TextDecoder().decode(await inflateRaw(frame))).toBe(text);
  });

  it("rejects a stream that is not raw DEFLATE, one longer than its header, and one shorter", async () => {
    const garbage = { offset: 3, length: 10, data: Uint8Array.from([0xff, 0xff, 0xff, 0xff]) };
    await expect(inflateRaw(garbage)).rejects.toThrow(/^deflated frame at offset 3: not a raw DEFLATE stream/);
    const real = new Uint8Array(deflateRawSync(bytes("x".repeat(1000))));
    await expect(inflateRaw({ offset: 4, length: 10, data: real })).rejects.toThrow("deflated frame at offset 4: inflates to more than the 10 bytes its header says");
    await expect(inflateRaw({ offset: 5, length: 2000, data: real })).rejects.toThrow("deflated frame at offset 5: inflated to 1000 bytes, its header says 2000");
  });
});

describe("InflatingInbox", () => {
  it("hands on messages at once while nothing inflates, and in order when something does", async () => {
    const { inbox, got, errors, settle } = recorder();
    inbox.push('{"type":"hello"}');
    inbox.push(buffer(encodeOutput(0, bytes("ab"))));
    expect(got).toEqual(['{"type":"hello"}', "output@0:ab"]); // no 0x06: nothing waits
    inbox.push(deflatedFrame(2, "cdef"));
    inbox.push(buffer(encodeOutput(6, bytes("g"))));
    inbox.push('{"type":"exit"}');
    inbox.push(deflatedFrame(7, "err", "stderr"));
    expect(got).toHaveLength(2); // behind a frame still inflating
    await settle();
    expect(got).toEqual(['{"type":"hello"}', "output@0:ab", "output@2:cdef", "output@6:g", '{"type":"exit"}', "stderr@7:err"]);
    expect(errors).toEqual([]);
  });

  it("reports a frame that does not inflate, drops it, and goes on with the rest", async () => {
    const { inbox, got, errors, settle } = recorder();
    const bad = encodeDeflated(0, 4, Uint8Array.from([0xff, 0xfe, 0xfd]));
    inbox.push(buffer(bad));
    inbox.push(deflatedFrame(4, "next"));
    inbox.push(buffer(Uint8Array.from([0x06, 1]))); // shorter than its header
    // The short frame is refused as it comes; the bad stream once its inflating fails.
    await settle();
    expect(errors).toEqual(["deflated frame shorter than its header", expect.stringMatching(/^deflated frame at offset 0: not a raw DEFLATE stream \(.+\)$/)]);
    expect(got).toEqual(["output@4:next"]);
  });
});
