// The console while a demo job runs: the list shows it running, the job page receives its
// events live (Server-Sent Events), and after the end shows the diff and per-test results.
// Then: the trajectory downloads; the list's filters work through their labelled controls;
// with JavaScript off the same pages read the same; no accessibility problem on any page.
import fs from "node:fs";
import { problems } from "./a11y.mjs";

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
  out.a11y = { job: await problems(page) };
  const jobUrl = page.url();
  const [dl] = await Promise.all([
    page.waitForEvent("download"),
    page.getByRole("link", { name: "Download the trajectory (JSONL)" }).click(),
  ]);
  out.trajectoryName = dl.suggestedFilename();
  out.trajectory = fs.readFileSync(await dl.path(), "utf8");
  // The filters, through their labels.
  await page.goto(`${cfg.console}/`);
  out.a11y.list = await problems(page);
  await page.getByLabel("State").selectOption("succeeded");
  await page.getByLabel("Repository").fill(cfg.repo);
  await page.getByRole("button", { name: "Filter" }).click();
  await page.waitForURL(/state=succeeded/);
  out.filterMatch = await page.locator("tbody tr", { hasText: cfg.repo }).count();
  await h.shot(page, "console-4-filter-succeeded");
  await page.getByLabel("State").selectOption("failed");
  await page.getByRole("button", { name: "Filter" }).click();
  await page.waitForURL(/state=failed/);
  out.filterOther = await page.locator("tbody tr").count();
  out.filterOtherText = await page.locator("main").textContent();
  // Without JavaScript: everything there is to read is in the page as served.
  const plain = await h.newPageWithoutScript();
  await plain.goto(jobUrl);
  out.plain = {
    state: await plain.locator("#job-state").textContent(),
    diff: await plain.locator("h2:has-text('Diff') + pre").textContent(),
    tests: await plain.locator("table.tests td").allTextContents(),
    headings: await plain.locator("h1, h2").allTextContents(),
    events: await plain.locator("#events tr").count(),
    scriptRan: await plain.locator("tr.live-event").count(),
    a11y: await problems(plain),
  };
  await h.shot(plain, "console-5-job-without-javascript");
  await plain.goto(`${cfg.console}/?state=succeeded`);
  out.plain.listRows = await plain.locator("tbody tr", { hasText: cfg.repo }).count();
  // The checker finds what it looks for: faint text, an unlabelled field, a skipped level.
  await page.evaluate(() => {
    const main = document.querySelector("main");
    main.insertAdjacentHTML("beforeend", '<h4>deep</h4><p id="faint">faint</p><input id="nolabel">');
    document.getElementById("faint").style.color = "#b0b0b0"; // (CSP refuses inline styles)
  });
  out.a11yProbe = await problems(page);
  return out;
}
