// What the benchmarks read about processes from /proc: resident memory, process trees, whether a
// process runs, which processes run a command.
import { readFileSync, readdirSync } from "node:fs";
import { statFields } from "../runner/process/proc.js";

/** Resident set size of `pid` in KiB, or 0 when it is gone. */
export function rssKiB(pid: number): number {
  try {
    return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0);
  } catch {
    return 0;
  }
}

/** CPU time (user + system) of `pid` in milliseconds (at the kernel's 10 ms tick), 0 when gone. */
export function cpuMs(pid: number): number {
  const fields = statFields(pid);
  return fields ? (Number(fields[11]) + Number(fields[12])) * 10 : 0;
}

/** Processes named `name` in the tree under `root` (e.g. the workerd under a wrangler process). */
export function descendantsNamed(root: number, name: string): number[] {
  const parent = new Map<number, number>();
  const names = new Map<number, string>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      parent.set(Number(entry), Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]));
      names.set(Number(entry), stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")")));
    } catch {
      // gone
    }
  }
  const under = (pid: number): boolean => pid === root || (pid > 1 && parent.has(pid) && under(parent.get(pid) ?? 1));
  return [...names].filter(([pid, n]) => n === name && under(pid)).map(([pid]) => pid);
}

/** Whether `pid` runs (exists and is not a zombie). */
export function alive(pid: number): boolean {
  const state = statFields(pid)?.[0];
  return state !== undefined && state !== "Z";
}

/** Pids of the processes whose command line, split at NULs, satisfies `match` (every process on the machine). */
export function pidsWhere(match: (argv: string[]) => boolean): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const argv = readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0");
      if (argv.at(-1) === "") argv.pop();
      if (match(argv) && alive(Number(entry))) pids.push(Number(entry));
    } catch {
      // gone
    }
  }
  return pids;
}
