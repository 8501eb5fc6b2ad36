// CORS_ORIGINS parsing: origins are compared as browsers send them; `*` allows any; entries
// that are not origins are ignored (and logged). The browser side is in test/cors.test.ts.
import { describe, expect, it } from "vitest";
import { parseOrigins } from "./cors.js";

describe("parseOrigins", () => {
  it("keeps origins as a browser sends them, and ignores what is not one", () => {
    expect(parseOrigins(undefined)).toEqual(new Set());
    expect(parseOrigins("")).toEqual(new Set());
    expect(parseOrigins(" https://App.Example.com/ , http://127.0.0.1:8080,https://x.example:443")).toEqual(
      new Set(["https://app.example.com", "http://127.0.0.1:8080", "https://x.example"]),
    );
    expect(parseOrigins("not an origin,https://a.example/path,ftp://b.example,https://ok.example")).toEqual(
      new Set(["https://ok.example"]),
    );
  });

  it("takes * as any origin", () => {
    expect(parseOrigins("https://a.example, *")).toBe("*");
  });
});
