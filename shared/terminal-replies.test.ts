import { describe, expect, it } from "vitest";
import { MAX_HELD_CHARS, ReplyStripper, stripReplies } from "./terminal-replies.js";

const ESC = "\x1b";
const ST = `${ESC}\\`;

/** What terminals answer to the queries of docs/protocol.md §5 (xterm.js 6, tmux 3.3, xterm). */
const REPLIES: Record<string, string> = {
  DA1: `${ESC}[?1;2c`,
  "DA1 (tmux)": `${ESC}[?1;2;4c`,
  DA2: `${ESC}[>0;276;0c`,
  "DA2 (tmux)": `${ESC}[>84;0;0c`,
  CPR: `${ESC}[24;80R`,
  "DSR ok": `${ESC}[0n`,
  "DSR private": `${ESC}[?10n`,
  "DECRPM private": `${ESC}[?2;2$y`,
  "DECRPM ansi": `${ESC}[4;2$y`,
  "window size": `${ESC}[8;24;80t`,
  "window state": `${ESC}[1t`,
  DECREQTPARM: `${ESC}[2;1;1;112;112;1;0x`,
  "kitty flags": `${ESC}[?0u`,
  XTQMODKEYS: `${ESC}[>4;2m`,
  "OSC 10 BEL": `${ESC}]10;rgb:ffff/ffff/ffff\x07`,
  "OSC 11 ST": `${ESC}]11;rgb:0000/0000/0000${ST}`,
  "OSC 4": `${ESC}]4;1;rgb:cdcd/0000/0000${ST}`,
  "OSC title": `${ESC}]lbash${ST}`,
  DECRQSS: `${ESC}P1$r0m${ST}`,
  "DECRQSS invalid": `${ESC}P0$r${ST}`,
  XTVERSION: `${ESC}P>|xterm.js(6.0.0)${ST}`,
  XTGETTCAP: `${ESC}P1+r544e=787465726d${ST}`,
  DA3: `${ESC}P!|00000000${ST}`,
  "focus in (at DECSET 1004)": `${ESC}[I`,
  "focus out": `${ESC}[O`,
};

/** What a person types: never a reply. */
const KEYS: Record<string, string> = {
  text: "echo MARK\r",
  utf8: "héllo ✓ 🙂",
  escape: ESC,
  up: `${ESC}[A`,
  "ctrl+up": `${ESC}[1;5A`,
  "app up": `${ESC}OA`,
  F1: `${ESC}OP`,
  F5: `${ESC}[15~`,
  "alt+x": `${ESC}x`,
  "escape then text": `${ESC}:wq\r`,
  "SGR mouse": `${ESC}[<0;10;5M`,
  "X10 mouse": `${ESC}[M !!`,
  paste: `${ESC}[200~line one\nline two${ESC}[201~`,
  "kitty key": `${ESC}[97;5u`,
  controls: "\x03\x04\x1d\x7f\t",
};

describe("stripReplies", () => {
  for (const [name, reply] of Object.entries(REPLIES)) {
    it(`cuts out ${name}`, () => {
      expect(stripReplies(reply)).toEqual({ kept: "", replies: [reply] });
      expect(stripReplies(`a${reply}b`)).toEqual({ kept: "ab", replies: [reply] });
    });
  }

  for (const [name, key] of Object.entries(KEYS)) {
    it(`keeps ${name}`, () => {
      expect(stripReplies(key)).toEqual({ kept: key, replies: [] });
    });
  }

  it("cuts every reply of a run and keeps the keys between them byte for byte", () => {
    const replies = Object.values(REPLIES);
    const keys = Object.values(KEYS);
    const input = replies.map((reply, i) => `${keys[i % keys.length]}${reply}`).join("");
    const want = replies.map((_, i) => keys[i % keys.length]).join("");
    expect(stripReplies(input)).toEqual({ kept: want, replies });
  });

  it("the issue's case: tmux's answers to a reattach's replay are all replies; a CPR has two numbers", () => {
    const typed = `${ESC}[2R${ESC}[R`;
    expect(stripReplies(`${ESC}[>84;0;0c${ESC}[?1;2c${ESC}[1;1R`)).toEqual({
      kept: "",
      replies: [`${ESC}[>84;0;0c`, `${ESC}[?1;2c`, `${ESC}[1;1R`],
    });
    expect(stripReplies(typed).kept).toBe(typed);
  });

  it("keeps a reply cut short at the end (nothing follows it here)", () => {
    expect(stripReplies(`x${ESC}]11;rgb:00`)).toEqual({ kept: `x${ESC}]11;rgb:00`, replies: [] });
  });
});

describe("ReplyStripper", () => {
  it("recognises a reply split at every position across two pieces", () => {
    for (const reply of Object.values(REPLIES)) {
      for (let cut = 1; cut < reply.length; cut++) {
        const stripper = new ReplyStripper();
        const first = stripper.push(`k${reply.slice(0, cut)}`);
        const second = stripper.push(`${reply.slice(cut)}z`);
        expect(first.kept + second.kept + stripper.flush(), `${JSON.stringify(reply)} cut at ${cut}`).toBe("kz");
        expect([...first.replies, ...second.replies]).toEqual([reply]);
      }
    }
  });

  it("gives keys split across pieces back whole, byte for byte", () => {
    for (const key of Object.values(KEYS)) {
      for (let cut = 1; cut < key.length; cut++) {
        const stripper = new ReplyStripper();
        const out = stripper.push(key.slice(0, cut)).kept + stripper.push(key.slice(cut)).kept + stripper.flush();
        expect(out, `${JSON.stringify(key)} cut at ${cut}`).toBe(key);
      }
    }
  });

  it("holds a lone Escape until the next piece or flush", () => {
    const stripper = new ReplyStripper();
    expect(stripper.push(`ab${ESC}`)).toEqual({ kept: "ab", replies: [] });
    expect(stripper.flush()).toBe(ESC);
    expect(stripper.flush()).toBe("");
    expect(stripper.push(ESC).kept).toBe("");
    expect(stripper.push(":q").kept).toBe(`${ESC}:q`);
  });

  it("stops holding an unfinished OSC past MAX_HELD_CHARS", () => {
    const stripper = new ReplyStripper();
    const long = `${ESC}]52;c;${"A".repeat(MAX_HELD_CHARS)}`;
    expect(stripper.push(long)).toEqual({ kept: long, replies: [] });
    expect(stripper.flush()).toBe("");
  });
});
