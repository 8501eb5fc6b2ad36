// Processes on this machine, as the end-to-end tests inspect them through /proc: what is left of
// a session's terminal session, which runner owns a process, whether a pid still lives.
import { readFileSync } from "node:fs";
import { statFields } from "../runner/process/proc.js";
import { sessionMembers } from "../runner/isolation/reaper.js";

/** Pids still alive (not zombies) in the terminal session led by `sid`. */
export function liveSessionProcesses(sid: number): number[] {
  return sessionMembers(sid).filter((pid) => {
    const state = statFields(pid)?.[0];
    return state !== undefined && state !== "Z";
  });
}

/** The parent pid of `pid` (which runner process owns a session). */
export function parentPid(pid: number): number {
  return Number(statFields(pid)?.[1]);
}

/** A live process (not a zombie). */
export function alive(pid: number): boolean {
  const state = statFields(pid)?.[0];
  return state !== undefined && state !== "Z";
}

/** A process's command line, words joined with spaces; "" once it is gone. */
export function commandOf(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter(Boolean).join(" ");
  } catch {
    return ""; // gone
  }
}
