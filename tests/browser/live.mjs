// The console while a demo job runs: the list shows it running, the job page receives its
// events live (Server-Sent Events), and after the end shows the diff and per-test results.
export default async function (h, cfg) {
  const page = await h.newPage();
  const out = {};
  await page.goto(`${cfg.console}/`);
  const row = page.locator("tbody tr", { hasText: cfg.repo });
  await row.first().waitFor();
  out.listState = await row.first().locator("td").nth(1).textContent();
  await h.shot(page, "console-1-job-list");
  await row.first().locator("a").first().click();
  await page.locator("#events").waitFor();
  out.liveAttr = await page.locator("#events").getAttribute("data-live");
  await page.locator("tr.live-event").first().waitFor({ timeout: 120000 });
  out.liveEvents = await page.locator("tr.live-event").count();
  await h.shot(page, "console-2-job-live");
  // The script reloads the page when the job ends.
  await page.locator("#pr-link").waitFor({ timeout: 240000 });
  out.state = await page.locator("#job-state").textContent();
  out.diff = await page.locator("h2:has-text('Diff') + pre").textContent();
  out.tests = await page.locator("table.tests td").allTextContents();
  out.evidence = await page.locator("h2:has-text('Evidence') + pre").textContent();
  out.headings = await page.locator("h1, h2").allTextContents();
  out.sandboxCommands = await page.locator("h2:has-text('Sandbox commands') ~ details summary").allTextContents();
  out.labels = await page.locator("label").count();
  await h.shot(page, "console-3-job-done");
  return out;
}
