import { describe, expect, it } from "vitest";
import { HELD_MAX_BYTES, type InputPiece, InputLedger, RESEND_KEEP_BYTES } from "./input-ledger.js";

const bytes = (text: string): InputPiece => ({ bytes: new TextEncoder().encode(text) });
const text = (pieces: InputPiece[]) => new TextDecoder().decode(Buffer.concat(pieces.map((piece) => piece.bytes)));

/** A ledger whose first link's runner has taken `taken` bytes. */
function linked(taken = 0): InputLedger {
  const ledger = new InputLedger();
  ledger.linkOpened();
  ledger.runnerTook(taken);
  return ledger;
}

describe("InputLedger", () => {
  it("sends input at once on a link whose runner count is known", () => {
    const ledger = linked();
    expect(ledger.input(bytes("ls\n"))).toEqual(bytes("ls\n"));
  });

  it("sends again exactly what the runner lacks after a new link, then what waited, in order", () => {
    const ledger = linked(10);
    for (const piece of ["ab", "cde", "fg"]) ledger.input(bytes(piece));
    ledger.linkOpened();
    expect(ledger.input(bytes("XY"))).toBe("held");
    // The runner took 10 + 3 ("abc"): "de", "fg" were lost with the link.
    const answer = ledger.runnerTook(13);
    expect(text(answer.resend)).toBe("defg");
    expect(answer.lost).toBe(0);
    expect(text(answer.held)).toBe("XY");
    // From here input goes straight out, and it counts: a second dead link loses "deXY" too.
    expect(ledger.input(bytes("Z"))).toEqual(bytes("Z"));
    ledger.linkOpened();
    expect(text(ledger.runnerTook(15).resend)).toBe("fgXYZ");
  });

  it("sends nothing again when the runner took everything, or more than counted", () => {
    const ledger = linked();
    ledger.input(bytes("abc"));
    ledger.linkOpened();
    expect(ledger.runnerTook(3)).toEqual({ resend: [], lost: 0, held: [] });
    ledger.linkOpened();
    expect(ledger.runnerTook(7)).toEqual({ resend: [], lost: 0, held: [] });
    ledger.input(bytes("d"));
    ledger.linkOpened();
    expect(text(ledger.runnerTook(7).resend)).toBe("d");
  });

  it("adopts the runner's count when it has none (a woken object), sending nothing again", () => {
    const ledger = new InputLedger();
    expect(ledger.input(bytes("before"))).toEqual(bytes("before"));
    ledger.linkOpened();
    expect(ledger.runnerTook(500)).toEqual({ resend: [], lost: 0, held: [] });
    ledger.input(bytes("x"));
    ledger.linkOpened();
    expect(text(ledger.runnerTook(500).resend)).toBe("x");
  });

  it("says how much is lost when more is missing than it keeps, and sends none of it (that would skip bytes)", () => {
    const ledger = linked();
    const piece = { bytes: new Uint8Array(64 << 10).fill(97) };
    const pieces = Math.ceil((2 * RESEND_KEEP_BYTES) / piece.bytes.byteLength);
    for (let i = 0; i < pieces; i++) ledger.input(piece);
    ledger.linkOpened();
    const answer = ledger.runnerTook(0);
    expect(answer.resend).toEqual([]);
    expect(answer.lost).toBeGreaterThan(0);
    expect(answer.lost).toBeLessThanOrEqual(pieces * piece.bytes.byteLength - RESEND_KEEP_BYTES);
    // Counting goes on from the runner's count.
    ledger.input(bytes("q"));
    ledger.linkOpened();
    expect(text(ledger.runnerTook(0).resend)).toBe("q");
  });

  it("holds at most HELD_MAX_BYTES (plus one write) before it says full", () => {
    const ledger = linked();
    ledger.linkOpened();
    const piece = { bytes: new Uint8Array(16 << 10) };
    let held = 0;
    while (!ledger.full) {
      expect(ledger.input(piece)).toBe("held");
      held += piece.bytes.byteLength;
    }
    expect(held).toBe(HELD_MAX_BYTES);
    expect(ledger.runnerTook(0).held).toHaveLength(held / piece.bytes.byteLength);
    expect(ledger.full).toBe(false);
  });

  it("with a runner that does not count, releases what waited and keeps nothing", () => {
    const ledger = new InputLedger();
    ledger.linkOpened();
    ledger.input(bytes("a"));
    expect(text(ledger.runnerTook(undefined).held)).toBe("a");
    ledger.input(bytes("b"));
    ledger.linkOpened();
    expect(ledger.runnerTook(undefined).resend).toEqual([]);
  });

  it("sends a writer's piece again from where the runner stopped, its offset moved with it", () => {
    const ledger = linked();
    ledger.input({ bytes: new TextEncoder().encode("abcd"), writer: { key: "k|w", offset: 100, base: 90 } });
    ledger.linkOpened();
    // The runner took "ab" of it: the rest goes again as the writer's bytes from 102.
    const [again] = ledger.runnerTook(2).resend;
    expect(new TextDecoder().decode(again?.bytes)).toBe("cd");
    expect(again?.writer).toEqual({ key: "k|w", offset: 102, base: 90 });
  });
});
