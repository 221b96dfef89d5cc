// Drives Chromium (Debian's, headless) through the page at each URL given, and prints one JSON
// line per page: what `runMcp(mcpUrl)` answered, or the error the browser gave it.
//   node run.mjs CHROMIUM MCP_URL PAGE_URL...
import { chromium } from "playwright-core";

const [executablePath, mcpUrl, ...pages] = process.argv.slice(2);
const browser = await chromium.launch({ executablePath, args: ["--no-sandbox", "--headless=new"] });
try {
  for (const pageUrl of pages) {
    const page = await browser.newPage();
    const consoleLines = [];
    page.on("console", (message) => consoleLines.push(message.text()));
    await page.goto(pageUrl);
    const outcome = await page.evaluate(async (url) => {
      try {
        return { ok: await window.runMcp(url) };
      } catch (error) {
        return { error: String(error) };
      }
    }, mcpUrl);
    console.log(JSON.stringify({ page: pageUrl, ...outcome, console: consoleLines }));
    await page.close();
  }
} finally {
  await browser.close();
}
