// Raw mode (xterm.js's attach addon, websocat) sends a paste as one frame, however large, and
// hears no error messages: a frame over MAX_INPUT_BYTES is written to the process in pieces, up
// to 1 MiB; a larger one closes the socket with 1009 and says why. Never dropped silently.
import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { onSharedStack, sha256 } from "./harness.js";

const suite = onSharedStack();
const { api } = suite;

/** A process that reads exactly `bytes` bytes from its terminal in raw mode, then says how many and their sha256. */
async function reader(bytes: number) {
  return suite.session({
    command: "/bin/bash",
    args: [
      "-c",
      `stty raw -echo; echo READY; head -c ${bytes} > paste.bin; ` +
        'printf "GOT %s %s END\\n" "$(wc -c < paste.bin)" "$(sha256sum < paste.bin | cut -d" " -f1)"; rm -f paste.bin',
    ],
    cwd: `raw-paste-${Date.now()}`,
  });
}

function rawClient(id: string) {
  return suite.connect(id, { query: "mode=raw" });
}

describe("raw-mode paste", () => {
  it("writes a 200 KiB paste sent as one raw frame whole, in pieces: the process reads every byte", async () => {
    const size = 200 * 1024; // > MAX_INPUT_BYTES (64 KiB) of the shared edge
    const paste = randomBytes(size);
    const s = await reader(size);
    const raw = rawClient(s.id);
    await raw.waitForOutput("READY");
    raw.socket.send(paste, { binary: true });
    await raw.waitForOutput(/GOT \d+ [0-9a-f]{64} END/, 20_000);
    const [, count, digest] = /GOT (\d+) ([0-9a-f]{64}) END/.exec(raw.text) ?? [];
    expect({ count: Number(count), digest }).toEqual({ count: size, digest: sha256(paste) });
    // It ends once it has said so. (How: `exitCode` 0, or about one run in three `signal: "SIGHUP"`,
    // which a `bash -c` ending with `stty raw` in effect shows with framed and small input too:
    // not about pieces.)
    const done = await api.request("GET", `/v1/sessions/${s.id}/wait?timeoutSec=30`);
    expect(done.body).toMatchObject({ status: "exited", reason: "exit" });
  });

  it("closes a raw client with 1009 and a reason when one frame is over 1 MiB, and writes none of it", async () => {
    const s = await reader(16);
    const raw = rawClient(s.id);
    await raw.waitForOutput("READY");
    const reason = new Promise<string>((resolve) => raw.socket.once("close", (_code, why: Buffer) => resolve(why.toString())));
    raw.socket.send(Buffer.alloc((1 << 20) + 1, 0x61), { binary: true });
    expect(await raw.waitForClose()).toBe(1009);
    expect(await reason).toBe("input frame is 1048577 bytes; at most 1048576");
    // None of it reached the process: it still waits for its 16 bytes, which a new client gives it.
    expect((await api.get(s.id)).status).toBe("running");
    const again = rawClient(s.id);
    await again.waitForOutput("READY");
    again.socket.send(Buffer.from("0123456789abcdef"), { binary: true });
    await again.waitForOutput(/GOT \d+ [0-9a-f]{64} END/);
    expect(again.text).toContain(`GOT 16 ${sha256(Buffer.from("0123456789abcdef"))} END`);
  });

  it("still refuses a framed client's input frame over MAX_INPUT_BYTES with PAYLOAD_TOO_LARGE", async () => {
    const s = await reader(16);
    const framed = suite.connect(s.id);
    await framed.waitForOutput("READY");
    framed.send(Buffer.alloc(65537, 0x61));
    const error = await framed.waitForMessage((m) => m.type === "error", "refusal");
    expect(error).toEqual({ type: "error", code: "PAYLOAD_TOO_LARGE", message: "input frame is 65537 bytes; at most 65536" });
    framed.send("0123456789abcdef");
    await framed.waitForOutput(/GOT \d+ [0-9a-f]{64} END/);
    expect(framed.text).toContain(`GOT 16 ${sha256(Buffer.from("0123456789abcdef"))} END`);
  });
});
