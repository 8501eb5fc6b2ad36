// Row 19: a session's create with a minted key (checked by its tenant's object on every request,
// docs/architecture.md "Tenants and keys") against the same create with an `API_KEYS` key (checked
// in the Worker's memory), same stack, same run, the two alternating create by create.
import { alternatingCreates, mintedKeyApi } from "../keys.js";
import type { BenchStack } from "../stack.js";
import { percentile } from "../stats.js";
import { type BenchConfig, type Progress, type Row, fmt, median } from "./row.js";

export async function keyRows(stack: BenchStack, adminKey: string, config: BenchConfig, progress: Progress): Promise<Row[]> {
  const minted = await mintedKeyApi(stack, adminKey);
  const mintedP50: number[] = [];
  const staticP50: number[] = [];
  for (let n = 1; n <= config.runs; n++) {
    // Which key goes first alternates between runs too.
    const order = n % 2 === 1 ? [minted, stack.api] : [stack.api, minted];
    const [first, second] = await alternatingCreates(order, config.keyCreates);
    const [m, s] = order[0] === minted ? [first, second] : [second, first];
    mintedP50.push(percentile(m, 50));
    staticP50.push(percentile(s, 50));
    progress(`19 run ${n}: create p50 with a minted key ${mintedP50.at(-1)?.toFixed(2)} ms, with an API_KEYS key ${staticP50.at(-1)?.toFixed(2)} ms`);
  }
  return [
    {
      n: 19,
      what: `\`POST /v1/sessions\` (\`/bin/cat\`) → 201 with a minted key, p50 (${config.keyCreates} × ${config.runs}, alternating create by create); baseline: the same with an \`API_KEYS\` key`,
      ours: fmt(mintedP50, 2, " ms"),
      baseline: fmt(staticP50, 2, " ms"),
      ratio: `${(median(mintedP50) / median(staticP50)).toFixed(2)}×`,
      target: "within the baseline's spread (≤ its max)",
      met: median(mintedP50) <= Math.max(...staticP50),
    },
  ];
}
