// tests/browser/drive.mjs - run one scenario in Debian's headless Chromium through
// playwright-core (never a downloaded browser). Usage: node drive.mjs SCENARIO.mjs
// The scenario's config comes as JSON in AP_BROWSER_CONFIG; screenshots go to
// AP_SCREENSHOTS. The last line of stdout is the JSON result {ok, data | error}.
import { chromium } from "playwright-core";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

const scenario = (await import(path.resolve(process.argv[2]))).default;
const cfg = JSON.parse(process.env.AP_BROWSER_CONFIG || "{}");
const shots = process.env.AP_SCREENSHOTS || "build-results/browser";
fs.mkdirSync(shots, { recursive: true });
const profile = fs.mkdtempSync(path.join(os.tmpdir(), "ap-chromium-"));
// A fresh profile (--user-data-dir) for every run: playwright passes it as the persistent
// context's directory.
const context = await chromium.launchPersistentContext(profile, {
  executablePath: "/usr/bin/chromium",
  headless: true,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
// A second browser, started on demand, for pages seen with JavaScript turned off.
let plain = null;
let result;
try {
  const helpers = {
    shot: async (page, name) => page.screenshot({ path: path.join(shots, `${name}.png`), fullPage: true }),
    newPage: async () => context.newPage(),
    newPageWithoutScript: async () => {
      plain = plain || await chromium.launch({
        executablePath: "/usr/bin/chromium", headless: true,
        args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic"] });
      return (await plain.newContext({ javaScriptEnabled: false })).newPage();
    },
    forget: async () => context.clearCookies(),
  };
  result = { ok: true, data: await scenario(helpers, cfg) };
} catch (e) {
  result = { ok: false, error: String(e && e.stack || e) };
} finally {
  if (plain) await plain.close();
  await context.close();
  fs.rmSync(profile, { recursive: true, force: true });
}
console.log(JSON.stringify(result));
