// Rows 15 and 16 (the session sandbox, docs/security.md), on a stack of their own (sandbox.ts):
// 15, what a sandbox costs a login shell's first prompt and an exec of `true`, with
// RUNNER_SANDBOX=bwrap (network egress, the default, and network none) against RUNNER_SANDBOX=none
// in the same run; 16, a tenant's keystroke echo while another tenant spins every core, against
// its own idle echo. A row that fails is printed as failed, with its error, and the others still
// run: the table is never lost to one row.
import { execTrueTrips, firstPromptTrips, neighbourEcho, type SandboxStack, startSandboxStack } from "../sandbox.js";
import { percentile } from "../stats.js";
import { type BenchConfig, type Progress, type Row, failedRow, fmt, median } from "./row.js";

/** The sandboxed variants of row 15, each against the unsandboxed runner. */
const VARIANTS = [
  { name: "bwrap, network egress", body: {}, want: { sandbox: "bwrap", network: "egress" } },
  { name: "bwrap, network none", body: { network: "none" }, want: { sandbox: "bwrap", network: "none" } },
] as const;
const PLAIN = { sandbox: "none" } as const;

type Samples = { p50: number[]; p99: number[] };
const samples = (): Samples => ({ p50: [], p99: [] });
const add = (into: Samples, ms: number[]) => {
  into.p50.push(percentile(ms, 50));
  into.p99.push(percentile(ms, 99));
};
const both = (s: Samples) => `p50 ${fmt(s.p50, 1, " ms")} · p99 ${fmt(s.p99, 1, " ms")}`;
const ratios = (s: Samples, base: Samples) =>
  `p50 ${(median(s.p50) / median(base.p50)).toFixed(2)}× · p99 ${(median(s.p99) / median(base.p99)).toFixed(2)}×`;

/** Row 15: create → first prompt and exec of `true`, `config.sandboxTrips` each per run and variant. */
async function costRows(stack: SandboxStack, config: BenchConfig, progress: Progress): Promise<Row[]> {
  const trips = config.sandboxTrips;
  const plain = { prompt: samples(), exec: samples() };
  const boxed = VARIANTS.map(() => ({ prompt: samples(), exec: samples(), error: undefined as unknown }));
  for (let run = 1; run <= config.runs; run++) {
    // The variants take turns within a run, so that drift in the machine's load falls on each alike.
    add(plain.prompt, await firstPromptTrips(stack.api.plain, trips, PLAIN));
    add(plain.exec, await execTrueTrips(stack.api.plain, trips, PLAIN));
    const line = [`15 run ${run}: none: prompt p50 ${plain.prompt.p50.at(-1)?.toFixed(1)} ms, exec p50 ${plain.exec.p50.at(-1)?.toFixed(1)} ms`];
    for (const [i, variant] of VARIANTS.entries()) {
      const into = boxed[i];
      if (into.error !== undefined) continue;
      try {
        add(into.prompt, await firstPromptTrips(stack.api.boxed, trips, variant.want, variant.body));
        add(into.exec, await execTrueTrips(stack.api.boxed, trips, variant.want, variant.body));
        line.push(`${variant.name}: prompt p50 ${into.prompt.p50.at(-1)?.toFixed(1)} ms, exec p50 ${into.exec.p50.at(-1)?.toFixed(1)} ms`);
      } catch (error) {
        into.error = error;
        line.push(`${variant.name}: failed (${(error as Error).message.split("\n")[0]})`);
      }
    }
    progress(line.join("; "));
  }
  const rows: Row[] = [];
  for (const [i, variant] of VARIANTS.entries()) {
    const into = boxed[i];
    const prompt = `sandbox cost: create → first prompt of a login bash, ${variant.name} (${trips} × ${config.runs}); baseline: RUNNER_SANDBOX=none`;
    const exec = `sandbox cost: \`POST /v1/exec\` of \`true\`, ${variant.name} (${trips} × ${config.runs}); baseline: RUNNER_SANDBOX=none`;
    if (into.error !== undefined) {
      rows.push(failedRow(15, prompt, into.error), failedRow(15, exec, into.error));
      continue;
    }
    rows.push({ n: 15, what: prompt, ours: both(into.prompt), baseline: both(plain.prompt), ratio: ratios(into.prompt, plain.prompt), target: "reported", met: undefined });
    rows.push({ n: 15, what: exec, ours: both(into.exec), baseline: both(plain.exec), ratio: ratios(into.exec, plain.exec), target: "reported", met: undefined });
  }
  return rows;
}

/** Row 16: B's echo while A spins, against B's idle echo in the same run. */
async function neighbourRows(stack: SandboxStack, config: BenchConfig, progress: Progress): Promise<Row[]> {
  const idle = samples();
  const spun = samples();
  let spinners = 0;
  for (let run = 1; run <= config.runs; run++) {
    const r = await neighbourEcho(stack, config.keystrokes);
    idle.p50.push(r.idle.p50);
    idle.p99.push(r.idle.p99);
    spun.p50.push(r.spun.p50);
    spun.p99.push(r.spun.p99);
    spinners = r.spinners;
    progress(
      `16 run ${run}: B's echo idle p50 ${r.idle.p50.toFixed(2)} / p99 ${r.idle.p99.toFixed(2)} ms, ` +
        `with A spinning ${r.spinners} loops p50 ${r.spun.p50.toFixed(2)} / p99 ${r.spun.p99.toFixed(2)} ms; A's processes gone ${r.goneMs.toFixed(0)} ms after its DELETE`,
    );
  }
  return [
    {
      n: 16,
      what: `neighbour echo under spin: tenant B's keystroke echo (${config.keystrokes} keys × ${config.runs} runs) while tenant A's session spins ${spinners} busy loops (default limits: 1 CPU); baseline: B's echo with A idle, same run; A's processes all gone after its DELETE`,
      ours: `p50 ${fmt(spun.p50, 2, " ms")} · p99 ${fmt(spun.p99, 2, " ms")}`,
      baseline: `p50 ${fmt(idle.p50, 2, " ms")} · p99 ${fmt(idle.p99, 2, " ms")}`,
      ratio: ratios(spun, idle),
      target: "reported",
      met: undefined,
    },
  ];
}

/** Rows 15 and/or 16 on a stack of their own, stopped before this returns; never throws. */
export async function sandboxRows(config: BenchConfig, wanted: { cost: boolean; neighbour: boolean }, progress: Progress): Promise<Row[]> {
  const rows: Row[] = [];
  let stack: SandboxStack;
  try {
    stack = await startSandboxStack();
  } catch (error) {
    if (wanted.cost) rows.push(failedRow(15, "sandbox cost", error));
    if (wanted.neighbour) rows.push(failedRow(16, "neighbour echo under spin", error));
    return rows;
  }
  progress(`sandbox stack up at ${stack.url}`);
  try {
    if (wanted.cost) rows.push(...(await costRows(stack, config, progress).catch((error) => [failedRow(15, "sandbox cost", error)])));
    if (wanted.neighbour) {
      rows.push(...(await neighbourRows(stack, config, progress).catch((error) => [failedRow(16, "neighbour echo under spin", error)])));
    }
  } finally {
    await stack.stop().catch((error: Error) => progress(`sandbox stack: stop failed: ${error.message}`));
  }
  return rows;
}
