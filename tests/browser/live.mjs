// The console while a demo job runs, as a person sees it in Chromium.
//  1. The job list is open before the job exists: the job's row appears (title, repository,
//     issue link) and its state changes, without a reload.
//  2. The job's page, reached through a TCP proxy this scenario runs: the timeline grows live;
//     the stage field changes without a reload; the proxy then cuts every connection (a forced
//     reconnect) and the stream resumes: every event id is shown once, none skipped (checked
//     against the page the server renders after the end).
//  3. The finished page leads with the answer (title, issue link, outcome with the PR link),
//     the evidence table, the diff; the details are folded until opened; "show all" serves
//     the whole text; the trajectory downloads; the filters live in the URL; the pages read
//     the same without JavaScript; no accessibility problem on any page.
import fs from "node:fs";
import net from "node:net";
import path from "node:path";
import { problems } from "./a11y.mjs";

// A TCP proxy to the console that notes each event-stream request and can cut everything.
function startProxy(target) {
  const url = new URL(target);
  const socks = new Set();
  const streams = [];
  const server = net.createServer((client) => {
    const up = net.connect(Number(url.port), url.hostname);
    socks.add(client);
    socks.add(up);
    const drop = () => { client.destroy(); up.destroy(); socks.delete(client); socks.delete(up); };
    client.once("data", (d) => {
      const head = d.toString("latin1");
      const m = head.match(/^GET (\S*events\S*)/);
      if (!m) return;
      // An event stream: note what it asked for and the event ids the server sent on it.
      const st = { path: m[1], lastEventId: (head.match(/^last-event-id: *(\d+)/im) || [])[1] || null, ids: [] };
      let text = "";
      streams.push(st);
      up.on("data", (b) => {
        text += b.toString("utf8");
        const cut = text.lastIndexOf("\n\n");
        if (cut < 0) return;
        for (const id of text.slice(0, cut).matchAll(/^id: (\d+)$/gm)) st.ids.push(id[1]);
        text = text.slice(cut + 2);
      });
    });
    client.pipe(up);
    up.pipe(client);
    client.on("error", drop); up.on("error", drop); client.on("close", drop); up.on("close", drop);
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve({
    url: `http://127.0.0.1:${server.address().port}`,
    streams,
    cut: () => { for (const s of [...socks]) s.destroy(); socks.clear(); },
    close: () => { for (const s of [...socks]) s.destroy(); server.close(); },
  })));
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Snapshots of the timeline's event ids until the page reloads (the script does at the end).
async function watchTimeline(page, until) {
  const snaps = [];
  for (;;) {
    let s;
    try {
      s = await page.evaluate(() => ({
        stay: window.__stay === 1,
        ids: [...document.querySelectorAll("#events tr")].map((r) => r.getAttribute("data-event")),
        live: document.querySelectorAll("#events tr.live-event").length,
        calls: document.getElementById("job-calls").textContent,
        tokens: document.getElementById("job-tokens").textContent,
      }));
    } catch (e) { break; } // navigating: the reload
    if (!s.stay) break;
    snaps.push(s);
    if (until && until(s)) return snaps;
    await sleep(150);
  }
  return snaps;
}

export default async function (h, cfg) {
  const out = {};
  const proxy = await startProxy(cfg.console);
  try {
    // 1. The list, open before the job exists.
    const list = await h.newPage();
    await list.goto(`${cfg.console}/`);
    await list.evaluate(() => { window.__stay = 1; });
    out.a11yEmptyList = await problems(list);
    fs.writeFileSync(path.join(cfg.dir, "list-open"), "1");
    const row = list.locator("#jobs tr", { hasText: cfg.repo });
    await row.first().waitFor({ timeout: 60000 });
    out.listRowTitle = await row.first().locator("td.title").textContent();
    out.listIssueHref = await row.first().locator("a.issue-link").getAttribute("href");
    out.listFirstState = (await row.first().locator("td.state").textContent()).trim();
    await list.locator("#jobs tr td.state", { hasText: "running" }).first().waitFor({ timeout: 60000 });
    out.listLaterState = (await row.first().locator("td.state").textContent()).trim();
    out.listCountRunning = await list.locator("#count-running").textContent();
    out.listMatching = await list.locator("#matching").textContent();
    out.listStayed = await list.evaluate(() => window.__stay === 1);
    out.a11yList = await problems(list);
    await h.shot(list, "console-list-running");

    // 2. The job's page through the proxy, live.
    const page = await h.newPage();
    await page.goto(`${proxy.url}/jobs/1`);
    await page.evaluate(() => { window.__stay = 1; });
    out.renderedIds = await page.locator("#events tr:not(.live-event)").evaluateAll((rs) => rs.map((r) => r.getAttribute("data-event")));
    out.liveAttr = await page.locator("#events").getAttribute("data-live");
    out.firstStage = await page.locator("#job-stage").textContent();
    const before = await watchTimeline(page, (s) => s.live >= 1);
    out.stageLater = await page.locator("#job-stage").textContent();
    for (let i = 0; i < 100 && out.stageLater === out.firstStage; i++) {
      await sleep(200);
      out.stageLater = await page.locator("#job-stage").textContent();
    }
    out.stageStayed = await page.evaluate(() => window.__stay === 1);
    out.runningState = await page.locator("#job-state").textContent();
    out.a11yRunning = await problems(page);
    await h.shot(page, "console-job-running");
    const streamsBefore = proxy.streams.length;
    proxy.cut(); // every connection: the browser must reconnect and resume
    const after = await watchTimeline(page, null);
    out.snapshots = before.concat(after).map((s) => s.ids);
    out.callsSeen = [...new Set(before.concat(after).map((s) => s.calls))];
    out.tokensSeen = [...new Set(before.concat(after).map((s) => s.tokens))];
    out.eventStreams = proxy.streams.slice();
    out.streamsBeforeCut = streamsBefore;
    // The end reloads the page: the server's own rendering of the whole timeline.
    await page.locator("#outcome a#pr-link").waitFor({ timeout: 240000 });
    out.finalIds = await page.locator("#events tr").evaluateAll((rs) => rs.map((r) => r.getAttribute("data-event")));
    await h.shot(page, "console-job-finished");

    // 3. The finished page.
    out.h1 = await page.locator("h1").textContent();
    out.issueHref = await page.locator("#issue-link").getAttribute("href");
    out.outcome = await page.locator("#outcome").textContent();
    out.prHref = await page.locator("#pr-link").getAttribute("href");
    out.state = await page.locator("#job-state").textContent();
    out.summary = await page.locator("dl.summary").textContent();
    out.evidence = await page.locator("table.evidence").textContent();
    out.diff = await page.locator("h2:has-text('Diff') + pre").textContent();
    out.headings = await page.locator("h1, h2, h3").allTextContents();
    // Folded: a sandbox command's output is hidden until its group and item are opened.
    const group = page.locator("h3:has-text('Sandbox commands') + details");
    out.groupOpen = await group.evaluate((d) => d.open);
    const firstItem = group.locator("details.item").first();
    out.itemVisibleFolded = await firstItem.locator("pre").first().isVisible();
    await group.locator("summary").first().click();
    await firstItem.locator("summary").click();
    out.itemVisibleOpened = await firstItem.locator("pre").first().isVisible();
    out.sandboxCommands = await group.locator("details.item > summary").allTextContents();
    await page.locator("h3:has-text('Tester runs') + details > summary").click();
    await page.locator("h3:has-text('Tester runs') + details details.item > summary").first().click();
    out.tests = await page.locator("table.tests td").allTextContents();
    out.a11yDone = await problems(page);
    const jobUrl = page.url().replace(proxy.url, cfg.console);
    // "Show all": the whole diff as text.
    const whole = await page.request.get(`${cfg.console}/jobs/1/output?line=0&field=diff`);
    out.wholeDiff = { status: whole.status(), type: whole.headers()["content-type"], text: await whole.text() };
    const [dl] = await Promise.all([
      page.waitForEvent("download"),
      page.getByRole("link", { name: "Download the trajectory (JSONL)" }).click(),
    ]);
    out.trajectoryName = dl.suggestedFilename();
    out.trajectory = fs.readFileSync(await dl.path(), "utf8");

    // The filters, through their labels, kept in the URL.
    await list.goto(`${cfg.console}/`);
    await list.getByLabel("State").selectOption("succeeded");
    await list.getByLabel("Repository").fill(cfg.repo);
    await list.getByRole("button", { name: "Filter" }).click();
    await list.waitForURL(/state=succeeded/);
    out.filterUrl = list.url();
    out.filterMatch = await list.locator("#jobs tr", { hasText: cfg.repo }).count();
    out.filterListState = await list.locator("#jobs tr td.state").first().textContent();
    await h.shot(list, "console-list-finished");
    await list.getByLabel("State").selectOption("failed");
    await list.getByRole("button", { name: "Filter" }).click();
    await list.waitForURL(/state=failed/);
    out.filterOther = await list.locator("#jobs tr").count();
    out.filterOtherText = await list.locator("main").textContent();

    // Without JavaScript: everything there is to read is in the page as served.
    const plain = await h.newPageWithoutScript();
    await plain.goto(jobUrl);
    out.plain = {
      h1: await plain.locator("h1").textContent(),
      outcome: await plain.locator("#outcome").textContent(),
      state: await plain.locator("#job-state").textContent(),
      diff: await plain.locator("h2:has-text('Diff') + pre").textContent(),
      headings: await plain.locator("h1, h2, h3").allTextContents(),
      events: await plain.locator("#events tr").count(),
      scriptRan: await plain.locator("tr.live-event").count(),
      a11y: await problems(plain),
    };
    await plain.locator("h3:has-text('Sandbox commands') + details > summary").click();
    out.plain.foldOpens = await plain.locator("h3:has-text('Sandbox commands') + details details.item > summary").first().isVisible();
    await h.shot(plain, "console-job-without-javascript");
    await plain.goto(`${cfg.console}/?state=succeeded&repo=${encodeURIComponent(cfg.repo)}`);
    out.plain.listRows = await plain.locator("#jobs tr", { hasText: cfg.repo }).count();
    out.plain.listTitle = await plain.locator("#jobs tr td.title").first().textContent();
    out.plain.listA11y = await problems(plain);
    // The checker finds what it looks for: faint text, an unlabelled field, a skipped level.
    await page.evaluate(() => {
      const main = document.querySelector("main");
      main.insertAdjacentHTML("beforeend", '<h5>deep</h5><p id="faint">faint</p><input id="nolabel">');
      document.getElementById("faint").style.color = "#b0b0b0";
    });
    out.a11yProbe = await problems(page);
  } finally {
    proxy.close();
  }
  return out;
}
