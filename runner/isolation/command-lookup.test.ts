// lookupCommand decides before the spawn whether a session's command can run, as execvp would
// search for it, and as the session's user: found, 127 (not there) or 126 (may not be run).
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { lookupCommand } from "./command-lookup.js";

const dir = mkdtempSync(join(tmpdir(), "command-lookup-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
chmodSync(dir, 0o755);
const bin = join(dir, "bin");
const locked = join(dir, "locked");
mkdirSync(bin, { mode: 0o755 });
mkdirSync(locked, { mode: 0o700 });
writeFileSync(join(bin, "tool"), "#!/bin/sh\n", { mode: 0o755 });
writeFileSync(join(bin, "plain"), "data\n", { mode: 0o644 });
writeFileSync(join(bin, "mine"), "#!/bin/sh\n", { mode: 0o700 });
writeFileSync(join(locked, "tool"), "#!/bin/sh\n", { mode: 0o755 });
mkdirSync(join(bin, "folder"));

const own = { path: `${bin}:/usr/bin:/bin`, cwd: dir, as: null };
const other = { ...own, as: { uid: 54321, gid: 54321 } };

describe("lookupCommand", () => {
  it("finds commands on PATH and paths from the cwd", () => {
    expect(lookupCommand("tool", own)).toEqual({ found: true });
    expect(lookupCommand("sh", own)).toEqual({ found: true });
    expect(lookupCommand("./bin/tool", own)).toEqual({ found: true });
    expect(lookupCommand(join(bin, "tool"), other)).toEqual({ found: true });
  });

  it("says 127 and 'command not found' for a name found nowhere on PATH", () => {
    expect(lookupCommand("no-such-cmd", own)).toEqual({
      found: false,
      exitCode: 127,
      message: "ptybroker: no-such-cmd: command not found",
    });
    expect(lookupCommand("", own)).toMatchObject({ found: false, exitCode: 127 });
  });

  it("says 127 and 'no such file or directory' for a path that is not there", () => {
    expect(lookupCommand("./nope", own)).toEqual({
      found: false,
      exitCode: 127,
      message: "ptybroker: ./nope: no such file or directory",
    });
  });

  it("says 126 and 'permission denied' for a file or folder that may not be executed", () => {
    for (const command of ["plain", "./bin/plain", "folder"]) {
      expect(lookupCommand(command, own), command).toEqual({
        found: false,
        exitCode: 126,
        message: `ptybroker: ${command}: permission denied`,
      });
    }
  });

  it("checks as the session's user: owner-only files and folders it cannot search are denied", () => {
    expect(lookupCommand("mine", other)).toMatchObject({ found: false, exitCode: 126 });
    expect(lookupCommand(join(locked, "tool"), other)).toMatchObject({ found: false, exitCode: 126 });
    // Not there, behind a folder it cannot search: denied, as execve would say; nothing leaks.
    expect(lookupCommand(join(locked, "nothing"), other)).toMatchObject({ found: false, exitCode: 126 });
    expect(lookupCommand("tool", { ...other, path: `${locked}:${bin}` })).toEqual({ found: true });
    expect(lookupCommand(join(bin, "mine"), { ...other, as: { uid: process.getuid?.() ?? 0, gid: 0 } })).toEqual({ found: true });
  });
});
