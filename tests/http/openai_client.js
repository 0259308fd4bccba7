// Calls client.embeddings.create(REQUEST) with the official OpenAI Node
// client and prints the result as JSON: the response, or
// {"error_status", "error_message"} for an API error.
// Usage: node openai_client.js BASE_URL API_KEY REQUEST_JSON
'use strict';
const mod = require('openai');
const OpenAI = mod.OpenAI || mod.default || mod;

async function main() {
  const [baseURL, apiKey, request] = process.argv.slice(2);
  const client = new OpenAI({baseURL, apiKey, maxRetries: 0, timeout: 60000});
  try {
    const response = await client.embeddings.create(JSON.parse(request));
    process.stdout.write(JSON.stringify(response));
  } catch (e) {
    if (!(e instanceof OpenAI.APIError) || e.status === undefined) throw e;
    process.stdout.write(JSON.stringify(
        {error_status: e.status, error_message: e.message}));
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
