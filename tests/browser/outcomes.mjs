// Finished jobs whose trajectories the test wrote: the outcome sentence of an environment
// failure and of a refusal, the evidence table, the state with its reason in the list, and
// "show all" of a long output (in place with JavaScript, as a plain page without).
import { problems } from "./a11y.mjs";

async function openFirstOutput(page) {
  const group = page.locator("h3:has-text('Sandbox commands') + details");
  await group.locator("summary").first().click();
  const item = group.locator("details.item").first();
  await item.locator("summary").click();
  return item;
}

export default async function (h, cfg) {
  const out = {};
  const page = await h.newPage();
  await page.goto(`${cfg.console}/jobs/${cfg.envJob}`);
  out.envOutcome = await page.locator("#outcome").textContent();
  out.envState = await page.locator("#job-state").textContent();
  const item = await openFirstOutput(page);
  out.cutLength = (await item.locator("pre").first().textContent()).length;
  out.showAllText = await item.locator("a.show-all").first().textContent();
  await item.locator("a.show-all").first().click();
  await item.locator("p.cut", { hasText: "Showing all of it." }).first().waitFor();
  out.wholeInPlace = await item.locator("pre").first().textContent();
  out.a11yEnv = await problems(page);
  await h.shot(page, "console-job-environment-failure");

  await page.goto(`${cfg.console}/jobs/${cfg.refusedJob}`);
  out.refusedOutcome = await page.locator("#outcome").textContent();
  out.refusedEvidence = await page.locator("table.evidence tbody tr").allTextContents();
  out.refusedRounds = await page.locator("#job-rounds").textContent();
  out.a11yRefused = await problems(page);

  await page.goto(`${cfg.console}/`);
  out.listStates = await page.locator("#jobs td.state").allTextContents();
  out.a11yList = await problems(page);

  // Without JavaScript: "show all" is a plain link to the whole text.
  const plain = await h.newPageWithoutScript();
  await plain.goto(`${cfg.console}/jobs/${cfg.envJob}`);
  const pitem = await openFirstOutput(plain);
  await pitem.locator("a.show-all").first().click();
  await plain.waitForURL(/\/output\?/);
  out.plainWhole = await plain.locator("body").textContent();
  return out;
}
