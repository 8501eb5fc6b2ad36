// Who sets the size (docs/protocol.md §5, "Who sets the size"): a session's size follows the
// writer that typed most recently (tmux's `latest`). A phone-sized writer and a desktop writer on
// one session: the one that typed last keeps its size while the other re-sends its own; typing
// makes a client's size the session's; a viewer's resize changes nothing; before anyone typed, a
// writer's resize applies; REST resize always applies. The size is checked where it matters:
// `stty size` in the PTY.
import { describe, expect, it } from "vitest";
import { Api, TermClient, onSharedStack, startSuiteStack, waitForRunners } from "./harness.js";

const suite = onSharedStack();
const { url, api } = suite;

async function mint(id: string, role: "viewer" | "writer"): Promise<string> {
  const res = await api.request("POST", `/v1/sessions/${id}/tokens`, { role, ttlSec: 600 });
  expect(res.status).toBe(201);
  return res.body.token;
}

function connect(id: string, credential: string, base = url) {
  return suite.cleanup.client(new TermClient(base, id, credential));
}

const resizes = (client: TermClient) => client.messages.filter((m) => m.type === "resize");
const answers = (client: TermClient) => client.messages.filter((m) => m.type === "resize" || m.type === "error");

/** Sends `resize` and resolves with the next `resize` (or `error`) message this client receives. */
async function resize(client: TermClient, cols: number, rows: number) {
  const before = answers(client).length;
  client.control({ type: "resize", cols, rows });
  await client.waitFor(
    () => answers(client).length > before || client.closeCode !== undefined,
    `a resize message after asking for ${cols}x${rows}`,
  );
  return answers(client)[before] ?? { closed: client.closeCode };
}

/** The PTY's size as the process sees it (`stty size` = rows cols), typed by `client`. */
async function sttySize(client: TermClient, tag: string): Promise<string> {
  client.send(`echo ${tag}:$(stty size):\n`);
  const pattern = new RegExp(`${tag}:(\\d+ \\d+):`);
  await client.waitForOutput(pattern);
  return pattern.exec(client.text)?.[1] ?? "";
}

async function size(id: string) {
  const s = await api.get(id);
  return { cols: s.cols, rows: s.rows };
}

describe("resize policy", () => {
  it("follows the writer that typed last: a phone and a desktop on one session, and a viewer", async () => {
    const s = await suite.session({ command: "/bin/bash", args: ["--norc", "--noprofile"], cols: 80, rows: 24 });
    const phone = connect(s.id, await mint(s.id, "writer"));
    const desktop = connect(s.id, await mint(s.id, "writer"));
    const viewer = connect(s.id, await mint(s.id, "viewer"));
    await Promise.all([phone, desktop, viewer].map((c) => c.waitForMessage((m) => m.type === "live", "live")));

    // Before anyone typed, any writer's resize applies, and everyone hears of it.
    expect(await resize(phone, 40, 20)).toEqual({ type: "resize", cols: 40, rows: 20 });
    await viewer.waitFor(() => resizes(viewer).length === 1, "the viewer hears the phone's size");
    expect(await size(s.id)).toEqual({ cols: 40, rows: 20 });
    expect(await resize(desktop, 120, 40)).toEqual({ type: "resize", cols: 120, rows: 40 });
    expect(await size(s.id)).toEqual({ cols: 120, rows: 40 });

    // The desktop types: the size is its own, and the phone re-sending its size changes nothing;
    // the phone is told the size the session keeps.
    expect(await sttySize(desktop, "desk1")).toBe("40 120");
    expect(await resize(phone, 40, 20)).toEqual({ type: "resize", cols: 120, rows: 40 });
    expect(await size(s.id)).toEqual({ cols: 120, rows: 40 });
    expect(await sttySize(desktop, "desk2")).toBe("40 120");

    // A viewer's resize is refused and changes nothing.
    viewer.control({ type: "resize", cols: 99, rows: 33 });
    expect(await viewer.waitForMessage((m) => m.type === "error", "the viewer's refusal")).toEqual({
      type: "error",
      code: "FORBIDDEN",
      message: "a viewer may not send input, resize, signal or eof",
    });
    expect(await size(s.id)).toEqual({ cols: 120, rows: 40 });

    // The phone types: its remembered size applies before its input reaches the process.
    const desktopHeard = resizes(desktop).length;
    expect(await sttySize(phone, "phone1")).toBe("20 40");
    expect(await size(s.id)).toEqual({ cols: 40, rows: 20 });
    await desktop.waitFor(() => resizes(desktop).length > desktopHeard, "the desktop hears the phone's size");
    expect(resizes(desktop).at(-1)).toEqual({ type: "resize", cols: 40, rows: 20 });

    // Now the desktop's resize is only remembered, until it types again.
    expect(await resize(desktop, 120, 40)).toEqual({ type: "resize", cols: 40, rows: 20 });
    expect(await size(s.id)).toEqual({ cols: 40, rows: 20 });
    expect(await sttySize(desktop, "desk3")).toBe("40 120");
    expect(await size(s.id)).toEqual({ cols: 120, rows: 40 });

    // REST resize (a writer token) always applies.
    const rest = await new Api(url, await mint(s.id, "writer")).request("POST", `/v1/sessions/${s.id}/resize`, { cols: 100, rows: 30 });
    expect(rest.status).toBe(200);
    expect({ cols: rest.body.cols, rows: rest.body.rows }).toEqual({ cols: 100, rows: 30 });
    expect(await sttySize(phone, "phone2")).toBe("20 40"); // and the phone typing takes it back
  });

  it("lets the next writer resize once the client that typed last has gone", async () => {
    const s = await suite.session({ command: "/bin/bash", args: ["--norc", "--noprofile"], cols: 80, rows: 24 });
    const desktop = connect(s.id, await mint(s.id, "writer"));
    const phone = connect(s.id, await mint(s.id, "writer"));
    await Promise.all([desktop, phone].map((c) => c.waitForMessage((m) => m.type === "live", "live")));
    await resize(desktop, 120, 40);
    expect(await sttySize(desktop, "desk")).toBe("40 120");
    expect(await resize(phone, 40, 20)).toEqual({ type: "resize", cols: 120, rows: 40 });
    await desktop.close();
    expect(await resize(phone, 40, 20)).toEqual({ type: "resize", cols: 40, rows: 20 });
    expect(await size(s.id)).toEqual({ cols: 40, rows: 20 });
  });
});

describe("resize policy across hibernation", () => {
  it("keeps who typed last and each client's remembered size while the session object sleeps", { timeout: 120_000 }, async () => {
    // An edge of its own: its log says when a client was restored from its attachment.
    const stack = await startSuiteStack({
      apiKeys: "sleepy:sleepy-key",
      runners: [{ runnerId: "resize-hibernation" }],
      waitForRunners: false,
    });
    const { edge, runnerToken } = stack;
    try {
      await waitForRunners(edge.url, runnerToken, 1);
      const own = new Api(edge.url, "sleepy-key");
      const s = await own.create({ command: "/bin/bash", args: ["--norc", "--noprofile"], cols: 80, rows: 24 });
      const [desktop, phone, tablet] = ["desktop", "phone", "tablet"].map(() => connect(s.id, "sleepy-key", edge.url));
      await Promise.all([desktop, phone, tablet].map((c) => c.waitForMessage((m) => m.type === "live", "live")));
      const restored = () => edge.output().split('"event":"client.restored"').length - 1;
      expect(await resize(desktop, 120, 40)).toEqual({ type: "resize", cols: 120, rows: 40 });
      for (let round = 1; ; round++) {
        // The desktop types (it holds the size), the phone asks for its own (remembered only).
        expect(await sttySize(desktop, `desk${round}`)).toBe("40 120");
        expect(await resize(phone, 50, 25)).toEqual({ type: "resize", cols: 120, rows: 40 });
        const before = restored();
        // Idle past workerd's hibernation timeout (about 10 s): the idle time is the scenario.
        await new Promise((r) => setTimeout(r, 11_000));
        // Woken by a client that never typed: the desktop still holds the size...
        expect(await resize(tablet, 70, 30)).toEqual({ type: "resize", cols: 120, rows: 40 });
        // ...and the phone's remembered size applies when it types.
        expect(await sttySize(phone, `phone${round}`)).toBe("25 50");
        if (restored() > before) break; // the object slept and rebuilt its clients from their attachments
        if (round === 4) throw new Error("the session object never hibernated");
      }
      await own.destroy(s.id);
    } catch (error) {
      console.error("EDGE OUTPUT\n" + edge.output().slice(-6000));
      throw error;
    } finally {
      await stack.stop();
    }
  });
});
