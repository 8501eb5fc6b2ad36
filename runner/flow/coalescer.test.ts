import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { Coalescer, type CoalescerOptions } from "./coalescer.js";

interface Chunk {
  offset: number;
  bytes: Buffer;
}

const DELAY = 10;

function setup(options: Partial<CoalescerOptions> = {}, startOffset?: number) {
  const chunks: Chunk[] = [];
  const coalescer = new Coalescer(
    // copy: the sink must not rely on the view staying unchanged, and neither should the test
    (offset, bytes) => chunks.push({ offset, bytes: Buffer.from(bytes) }),
    { maxBytes: 64, delayMs: DELAY, ...options },
    startOffset,
  );
  return { coalescer, chunks };
}

const text = (chunk: Chunk): string => chunk.bytes.toString("latin1");
const utf8 = (value: string): Buffer => Buffer.from(value, "utf8");
const joined = (chunks: readonly Chunk[]): Buffer => Buffer.concat(chunks.map((c) => c.bytes));

function decodesStrictly(bytes: Uint8Array): boolean {
  try {
    new TextDecoder("utf-8", { fatal: true }).decode(bytes);
    return true;
  } catch {
    return false;
  }
}

/** Offsets start at `start` and each chunk begins where the previous one ended. */
function expectContiguous(chunks: readonly Chunk[], start = 0): void {
  let next = start;
  for (const [i, chunk] of chunks.entries()) {
    expect(chunk.offset, `chunk ${i}`).toBe(next);
    expect(chunk.bytes.byteLength, `chunk ${i} is empty`).toBeGreaterThan(0);
    next += chunk.bytes.byteLength;
  }
}

beforeEach(() => {
  vi.useFakeTimers();
});

afterEach(() => {
  vi.useRealTimers();
});

describe("Coalescer", () => {
  it("emits chunks below maxBytes once, after delayMs, as one chunk at offset 0", () => {
    const { coalescer, chunks } = setup();
    coalescer.push(Buffer.from("ab"));
    coalescer.push(Buffer.from("cd"));
    expect(coalescer.pending).toBe(4);
    vi.advanceTimersByTime(DELAY - 1);
    expect(chunks).toHaveLength(0);
    vi.advanceTimersByTime(1);
    expect(chunks).toHaveLength(1);
    expect(chunks[0].offset).toBe(0);
    expect(text(chunks[0])).toBe("abcd");
    expect(coalescer.pending).toBe(0);
    expect(coalescer.offset).toBe(4);
    vi.advanceTimersByTime(DELAY * 10);
    expect(chunks).toHaveLength(1);
    expect(vi.getTimerCount()).toBe(0);
  });

  it("with leadingEdge, emits pushes at once within the window's budget, then gathers", () => {
    const { coalescer, chunks } = setup({ leadingEdge: true, immediateBytes: 4 });
    coalescer.push(Buffer.from("ab"));
    coalescer.push(Buffer.from("cd"));
    expect(chunks.map(text)).toEqual(["ab", "cd"]);
    // The budget of 4 bytes is spent: the rest of this window is gathered.
    coalescer.push(Buffer.from("e"));
    coalescer.push(Buffer.from("f"));
    expect(chunks.map(text)).toEqual(["ab", "cd"]);
    vi.advanceTimersByTime(DELAY);
    expect(chunks.map(text)).toEqual(["ab", "cd", "ef"]);
    // A new window, a new budget.
    coalescer.push(Buffer.from("g"));
    expect(chunks.map(text)).toEqual(["ab", "cd", "ef", "g"]);
    expectContiguous(chunks);
  });

  it("with leadingEdge, still holds an unfinished character back", () => {
    const { coalescer, chunks } = setup({ leadingEdge: true });
    const euro = utf8("€");
    coalescer.push(euro.subarray(0, 1));
    expect(chunks).toHaveLength(0);
    coalescer.push(euro.subarray(1));
    vi.advanceTimersByTime(DELAY);
    expect(joined(chunks).toString("utf8")).toBe("€");
    expect(chunks).toHaveLength(1);
  });

  it("does not restart the delay on every push (bounded latency)", () => {
    const { coalescer, chunks } = setup();
    coalescer.push(Buffer.from("a"));
    vi.advanceTimersByTime(DELAY - 2);
    coalescer.push(Buffer.from("b"));
    vi.advanceTimersByTime(2);
    expect(chunks.map(text)).toEqual(["ab"]);
  });

  it("ignores empty pushes", () => {
    const { coalescer, chunks } = setup();
    coalescer.push(Buffer.alloc(0));
    expect(coalescer.pending).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
    vi.advanceTimersByTime(DELAY * 3);
    expect(chunks).toHaveLength(0);
  });

  it("emits nothing when flushed empty", () => {
    const { coalescer, chunks } = setup();
    coalescer.flush();
    coalescer.flush(true);
    expect(chunks).toHaveLength(0);
  });

  it("numbers chunks with contiguous offsets across flushes", () => {
    const { coalescer, chunks } = setup();
    coalescer.push(Buffer.from("abc"));
    vi.advanceTimersByTime(DELAY);
    coalescer.push(Buffer.from("de"));
    vi.advanceTimersByTime(DELAY);
    coalescer.push(Buffer.from("f"));
    coalescer.flush();
    coalescer.push(Buffer.from("ghij"));
    coalescer.flush(true);
    expect(chunks.map((c) => [c.offset, text(c)])).toEqual([
      [0, "abc"],
      [3, "de"],
      [5, "f"],
      [6, "ghij"],
    ]);
    expect(coalescer.offset).toBe(10);
  });

  it("starts at the offset it is given", () => {
    const start = 2 ** 40 + 5;
    const { coalescer, chunks } = setup({}, start);
    coalescer.push(Buffer.from("xy"));
    vi.advanceTimersByTime(DELAY);
    coalescer.push(Buffer.from("z"));
    vi.advanceTimersByTime(DELAY);
    expect(chunks.map((c) => c.offset)).toEqual([start, start + 2]);
    expect(coalescer.offset).toBe(start + 3);
  });

  it("emits immediately when maxBytes is reached", () => {
    const { coalescer, chunks } = setup({ maxBytes: 8 });
    coalescer.push(Buffer.from("abcde"));
    expect(chunks).toHaveLength(0);
    coalescer.push(Buffer.from("fgh"));
    expect(chunks.map((c) => [c.offset, text(c)])).toEqual([[0, "abcdefgh"]]);
    expect(coalescer.pending).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
    vi.advanceTimersByTime(DELAY * 3);
    expect(chunks).toHaveLength(1);
  });

  it("splits one push larger than maxBytes into pieces of at most maxBytes", () => {
    const { coalescer, chunks } = setup({ maxBytes: 8 });
    const input = Buffer.from("abcdefghijklmnopqrstuvwxyz0123");
    coalescer.push(input);
    vi.advanceTimersByTime(DELAY * 2);
    expect(chunks.length).toBeGreaterThanOrEqual(Math.ceil(input.byteLength / 8));
    for (const chunk of chunks) expect(chunk.bytes.byteLength).toBeLessThanOrEqual(8);
    expect(chunks.slice(0, 3).map((c) => c.bytes.byteLength)).toEqual([8, 8, 8]);
    expectContiguous(chunks);
    expect(joined(chunks).equals(input)).toBe(true);
  });

  it("splits a large multi-byte push on character boundaries only", () => {
    const { coalescer, chunks } = setup({ maxBytes: 8 });
    const input = utf8("€€€€€😀😀éé€a😀");
    coalescer.push(input);
    vi.advanceTimersByTime(DELAY * 2);
    for (const chunk of chunks) {
      expect(chunk.bytes.byteLength).toBeLessThanOrEqual(8);
      expect(decodesStrictly(chunk.bytes), chunk.bytes.toString("hex")).toBe(true);
    }
    expectContiguous(chunks);
    expect(joined(chunks).equals(input)).toBe(true);
  });

  it("keeps a character split across two pushes within one chunk", () => {
    const { coalescer, chunks } = setup();
    const euro = utf8("€"); // e2 82 ac
    coalescer.push(Buffer.concat([Buffer.from("a"), euro.subarray(0, 2)]));
    coalescer.push(Buffer.concat([euro.subarray(2), Buffer.from("b")]));
    vi.advanceTimersByTime(DELAY);
    expect(chunks).toHaveLength(1);
    expect(chunks[0].bytes.toString("utf8")).toBe("a€b");
  });

  it("holds an unfinished character back when the delay fires between the two pushes", () => {
    const { coalescer, chunks } = setup();
    const smiley = utf8("😀"); // f0 9f 98 80
    coalescer.push(Buffer.concat([Buffer.from("hi"), smiley.subarray(0, 1)]));
    vi.advanceTimersByTime(DELAY);
    expect(chunks.map((c) => c.bytes.toString("utf8"))).toEqual(["hi"]);
    expect(coalescer.pending).toBe(1);
    coalescer.push(smiley.subarray(1));
    vi.advanceTimersByTime(DELAY);
    expect(chunks.map((c) => [c.offset, c.bytes.toString("utf8")])).toEqual([
      [0, "hi"],
      [2, "😀"],
    ]);
  });

  it("holds an unfinished character back when maxBytes is reached in the middle of it", () => {
    const { coalescer, chunks } = setup({ maxBytes: 8 });
    const euro = utf8("€");
    coalescer.push(Buffer.concat([Buffer.from("abcdefg"), euro.subarray(0, 1)]));
    expect(chunks.map((c) => c.bytes.toString("utf8"))).toEqual(["abcdefg"]);
    expect(coalescer.pending).toBe(1);
    coalescer.push(euro.subarray(1));
    vi.advanceTimersByTime(DELAY);
    expect(chunks.map((c) => [c.offset, c.bytes.toString("utf8")])).toEqual([
      [0, "abcdefg"],
      [7, "€"],
    ]);
  });

  it("never splits a character across chunks, for every way to cut the input into pushes (property)", () => {
    const input = utf8("a€é😀b中€😀😀x");
    for (const maxBytes of [4, 5, 6, 7, 8, 13, 64]) {
      for (let cut1 = 1; cut1 < input.byteLength; cut1++) {
        for (let cut2 = cut1; cut2 < input.byteLength; cut2++) {
          for (const gap of [0, DELAY - 1]) {
            const { coalescer, chunks } = setup({ maxBytes });
            coalescer.push(input.subarray(0, cut1));
            vi.advanceTimersByTime(gap);
            if (cut2 > cut1) {
              // only real pushes: consecutive pushes stay within one delay of each other
              coalescer.push(input.subarray(cut1, cut2));
              vi.advanceTimersByTime(gap);
            }
            coalescer.push(input.subarray(cut2));
            vi.advanceTimersByTime(DELAY * 3);
            const context = `maxBytes ${maxBytes}, cuts ${cut1}/${cut2}, gap ${gap}`;
            expect(coalescer.pending, context).toBe(0);
            expect(joined(chunks).equals(input), context).toBe(true);
            expectContiguous(chunks);
            for (const chunk of chunks) {
              expect(chunk.bytes.byteLength, context).toBeLessThanOrEqual(maxBytes);
              expect(decodesStrictly(chunk.bytes), `${context}: ${chunk.bytes.toString("hex")}`).toBe(true);
            }
            coalescer.dispose();
          }
        }
      }
    }
  });

  it("never splits a character for random pushes arriving within one delay of each other (property)", () => {
    const alphabet = ["a", "b", "\n", "é", "€", "中", "😀", "𝄞"];
    let seed = 987654321;
    const random = (): number => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    for (let round = 0; round < 100; round++) {
      let source = "";
      const length = 1 + Math.floor(random() * 60);
      for (let i = 0; i < length; i++) source += alphabet[Math.floor(random() * alphabet.length)];
      const input = utf8(source);
      const maxBytes = 4 + Math.floor(random() * 16);
      const { coalescer, chunks } = setup({ maxBytes });
      let at = 0;
      while (at < input.byteLength) {
        const size = 1 + Math.floor(random() * 12);
        coalescer.push(input.subarray(at, at + size));
        at += size;
        vi.advanceTimersByTime(Math.floor(random() * DELAY)); // 0 .. DELAY - 1
      }
      vi.advanceTimersByTime(DELAY * 3);
      const context = `round ${round}: ${JSON.stringify(source)}, maxBytes ${maxBytes}`;
      expect(coalescer.pending, context).toBe(0);
      expect(joined(chunks).equals(input), context).toBe(true);
      expectContiguous(chunks);
      for (const chunk of chunks) {
        expect(chunk.bytes.byteLength, context).toBeLessThanOrEqual(maxBytes);
        expect(decodesStrictly(chunk.bytes), `${context}: ${chunk.bytes.toString("hex")}`).toBe(true);
      }
    }
  });

  it("flush() without final keeps an unfinished tail", () => {
    const { coalescer, chunks } = setup();
    coalescer.push(Buffer.concat([Buffer.from("a"), utf8("€").subarray(0, 2)]));
    coalescer.flush();
    expect(chunks.map(text)).toEqual(["a"]);
    expect(coalescer.pending).toBe(2);
  });

  it("flush(true) emits an unfinished tail", () => {
    const { coalescer, chunks } = setup();
    const partial = Buffer.concat([Buffer.from("a"), utf8("€").subarray(0, 2)]);
    coalescer.push(partial);
    coalescer.flush(true);
    expect(joined(chunks).equals(partial)).toBe(true);
    expectContiguous(chunks);
    expect(coalescer.pending).toBe(0);
    expect(coalescer.offset).toBe(3);
    expect(vi.getTimerCount()).toBe(0);
    vi.advanceTimersByTime(DELAY * 3);
    expect(joined(chunks).equals(partial)).toBe(true);
  });

  it("flush(true) emits a tail held back by an earlier flush", () => {
    const { coalescer, chunks } = setup();
    const smiley = utf8("😀");
    coalescer.push(Buffer.concat([Buffer.from("ok"), smiley.subarray(0, 3)]));
    vi.advanceTimersByTime(DELAY);
    expect(chunks.map(text)).toEqual(["ok"]);
    coalescer.flush(true);
    expect(chunks.map((c) => [c.offset, c.bytes.toString("hex")])).toEqual([
      [0, "6f6b"],
      [2, "f09f98"],
    ]);
    expect(coalescer.pending).toBe(0);
  });

  it.each([
    ["a 2-byte lead", [0xc3]],
    ["a 3-byte lead and one continuation", [0xe2, 0x82]],
    ["a 4-byte lead and two continuations", [0xf0, 0x9f, 0x98]],
  ])("emits an unfinished tail (%s) with no following data within two delay periods", (_label, tail) => {
    const { coalescer, chunks } = setup();
    const input = Buffer.concat([Buffer.from("xyz"), Buffer.from(tail)]);
    coalescer.push(input);
    vi.advanceTimersByTime(DELAY);
    expect(chunks.map(text)).toEqual(["xyz"]);
    vi.advanceTimersByTime(DELAY);
    expect(joined(chunks).equals(input)).toBe(true);
    expectContiguous(chunks);
    expect(chunks[chunks.length - 1].offset).toBe(3);
    expect(coalescer.pending).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
  });

  it("emits a lone unfinished lead byte within two delay periods", () => {
    const { coalescer, chunks } = setup();
    coalescer.push(Buffer.from([0xe2]));
    vi.advanceTimersByTime(DELAY * 2);
    expect(chunks.map((c) => [c.offset, c.bytes.toString("hex")])).toEqual([[0, "e2"]]);
  });

  it("emits the tail left by a maxBytes flush within two delay periods", () => {
    const { coalescer, chunks } = setup({ maxBytes: 8 });
    const input = Buffer.concat([Buffer.from("abcdefg"), utf8("😀").subarray(0, 2)]);
    coalescer.push(input);
    expect(chunks.map(text)).toEqual(["abcdefg"]);
    vi.advanceTimersByTime(DELAY * 2);
    expect(joined(chunks).equals(input)).toBe(true);
    expectContiguous(chunks);
    expect(coalescer.pending).toBe(0);
  });

  it("lets invalid UTF-8 (lone continuation bytes, 0xff) through", () => {
    const { coalescer, chunks } = setup();
    const input = Buffer.from([0x80, 0x80, 0x80, 0xff, 0x41]);
    coalescer.push(input);
    vi.advanceTimersByTime(DELAY);
    expect(joined(chunks).equals(input)).toBe(true);
  });

  it("dispose() cancels the timer and drops what was buffered", () => {
    const { coalescer, chunks } = setup();
    coalescer.push(Buffer.from("abc"));
    expect(vi.getTimerCount()).toBe(1);
    coalescer.dispose();
    expect(vi.getTimerCount()).toBe(0);
    expect(coalescer.pending).toBe(0);
    vi.advanceTimersByTime(DELAY * 10);
    expect(chunks).toHaveLength(0);
  });

  it("dispose() cancels the timer of a held-back tail", () => {
    const { coalescer, chunks } = setup();
    coalescer.push(Buffer.concat([Buffer.from("a"), utf8("€").subarray(0, 1)]));
    vi.advanceTimersByTime(DELAY);
    expect(chunks.map(text)).toEqual(["a"]);
    coalescer.dispose();
    expect(vi.getTimerCount()).toBe(0);
    vi.advanceTimersByTime(DELAY * 10);
    expect(chunks).toHaveLength(1);
  });

  it("reuses no timer after a flush empties the buffer", () => {
    const { coalescer, chunks } = setup();
    coalescer.push(Buffer.from("abc"));
    coalescer.flush();
    expect(chunks.map(text)).toEqual(["abc"]);
    expect(vi.getTimerCount()).toBe(0);
  });
});

describe("Coalescer with two streams (pty: false)", () => {
  function twoStreams() {
    const chunks: { offset: number; text: string; stream: string }[] = [];
    const coalescer = new Coalescer((offset, bytes, stream) => chunks.push({ offset, text: bytes.toString("utf8"), stream }), {
      maxBytes: 64,
      delayMs: DELAY,
    });
    return { coalescer, chunks };
  }

  it("never mixes the streams in a chunk: a push of the other one emits what is pending first", () => {
    const { coalescer, chunks } = twoStreams();
    coalescer.push(utf8("out-1 "));
    coalescer.push(utf8("out-2 "));
    coalescer.push(utf8("err-1 "), "stderr");
    coalescer.push(utf8("out-3"));
    coalescer.flush(true);
    expect(chunks).toEqual([
      { offset: 0, text: "out-1 out-2 ", stream: "stdout" },
      { offset: 12, text: "err-1 ", stream: "stderr" },
      { offset: 18, text: "out-3", stream: "stdout" },
    ]);
  });

  it("holds a stream's unfinished character while the other writes, and finishes it with that stream's next bytes", () => {
    const { coalescer, chunks } = twoStreams();
    const euro = utf8("€");
    coalescer.push(Buffer.concat([utf8("a"), euro.subarray(0, 1)]));
    coalescer.push(utf8("E"), "stderr");
    coalescer.push(euro.subarray(1));
    coalescer.flush(true);
    expect(chunks).toEqual([
      { offset: 0, text: "a", stream: "stdout" },
      { offset: 1, text: "E", stream: "stderr" },
      { offset: 2, text: "€", stream: "stdout" },
    ]);
  });

  it("emits a held unfinished character at the end, as it is", () => {
    const { coalescer, chunks } = twoStreams();
    coalescer.push(utf8("€").subarray(0, 2), "stderr");
    coalescer.push(utf8("o"));
    coalescer.flush(true);
    // The two bytes of the unfinished € (read back as U+FFFD), then "o" after them.
    expect(chunks).toEqual([
      { offset: 0, text: "\ufffd", stream: "stderr" },
      { offset: 2, text: "o", stream: "stdout" },
    ]);
  });
});
