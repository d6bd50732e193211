// bench/webhook-ingest/probot/app.js - the minimal Probot 14 app autopatch is compared with.
// It accepts the same signed issues.labeled deliveries (Probot verifies the signature and
// answers 200 once the handler resolves); it persists nothing, so it is a generous baseline.
// Started by ../run with APP_ID, PRIVATE_KEY, WEBHOOK_SECRET, HOST, PORT, LOG_LEVEL=warn.
import { run } from "probot";

let accepted = 0;

const app = (probot) => {
  probot.on("issues.labeled", async (context) => {
    accepted += context.payload.issue.number > 0 ? 1 : 0;
  });
};

await run(app);
