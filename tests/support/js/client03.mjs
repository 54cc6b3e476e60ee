// An A2A 0.3 client scenario against the platform, run with the official JavaScript SDK of
// that version (@a2a-js/sdk 0.3.14): an independent client, importing nothing of the
// platform.
//
//   node client03.mjs BASE_URL TOKEN SKILL_ID HOOK_URL
//
// It discovers the platform from its card (the 0.3 fields: url, preferredTransport), then
// sends (blocking), gets, sends without blocking and cancels, streams, resubscribes across
// an INPUT_REQUIRED round trip, sets, reads, lists and deletes a push config, and asks for
// an unknown task. It prints one JSON object saying what it saw; the test asserts on it.
import { randomUUID } from 'node:crypto';
import { bearerFetch, errorOf } from './peer_common.mjs';
import { ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory, TaskNotFoundError } from '@a2a-js/sdk/client';

const [base, token, skillId, hook] = process.argv.slice(2);

// The caller's bearer token on every request the transports make.
const fetchImpl = bearerFetch(token);

function message(behaviour, extra = {}, task = undefined) {
  return {
    kind: 'message',
    messageId: randomUUID(),
    role: 'user',
    parts: [{ kind: 'data', data: { product: 'lamp', behaviour, ...extra } }],
    metadata: { skillId },
    ...(task ? { taskId: task.id, contextId: task.contextId } : {}),
  };
}

// The state each streamed event tells, as it arrives.
async function streamedStates(stream) {
  const seen = [];
  for await (const event of stream) {
    if (event.kind === 'task' || event.kind === 'status-update') seen.push(event.status.state);
  }
  return seen;
}

async function main() {
  const seen = {};
  const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [new JsonRpcTransportFactory({ fetchImpl })],
  }));
  const client = await factory.createFromUrl(base);
  seen.card = (await client.getAgentCard()).protocolVersion;

  // Blocking send: the finished task with the agent's artifact.
  const done = await client.sendMessage({ message: message('complete'), configuration: { blocking: true } });
  seen.send = { kind: done.kind, state: done.status.state, artifact: done.artifacts?.[0]?.parts?.[0]?.data ?? null };
  const got = await client.getTask({ id: done.id, historyLength: 1 });
  seen.get = { same: got.id === done.id, state: got.status.state, history: got.history?.length ?? 0 };

  // Without blocking, then cancel.
  const busy = await client.sendMessage({ message: message('working'), configuration: { blocking: false } });
  seen.busy = busy.status.state;
  await new Promise((resolve) => setTimeout(resolve, 500));
  seen.cancel = (await client.cancelTask({ id: busy.id })).status.state;

  // Streaming send.
  seen.stream = await streamedStates(client.sendMessageStream({ message: message('slow', { seconds: 0.3 }) }));

  // INPUT_REQUIRED, a resubscription open across the answer.
  const asked = await client.sendMessage({ message: message('ask'), configuration: { blocking: true } });
  seen.asked = asked.status.state;
  const following = streamedStates(client.resubscribeTask({ id: asked.id }));
  await new Promise((resolve) => setTimeout(resolve, 1000));
  const answered = await client.sendMessage({ message: message('answer', { answer: 'EU' }, asked), configuration: { blocking: true } });
  seen.answered = answered.status.state;
  seen.subscribed = await following;

  // A push config: set, get, list, delete.
  const config = { id: 'hook-js03', url: hook, token: 'tok-js03', authentication: { schemes: ['Bearer'], credentials: 'hook-secret' } };
  const stored = await client.setTaskPushNotificationConfig({ taskId: asked.id, pushNotificationConfig: config });
  const read = await client.getTaskPushNotificationConfig({ id: asked.id, pushNotificationConfigId: 'hook-js03' });
  const listed = await client.listTaskPushNotificationConfig({ id: asked.id });
  await client.deleteTaskPushNotificationConfig({ id: asked.id, pushNotificationConfigId: 'hook-js03' });
  const after = await client.listTaskPushNotificationConfig({ id: asked.id });
  seen.push = {
    stored: stored.pushNotificationConfig.url === hook && stored.taskId === asked.id,
    read: read.pushNotificationConfig.token,
    schemes: read.pushNotificationConfig.authentication?.schemes ?? null,
    listed: listed.map((c) => c.pushNotificationConfig.id),
    after: after.length,
  };

  seen.unknown = await errorOf(() => client.getTask({ id: 'no-such-task' }), TaskNotFoundError);
  // A streaming method's error comes as its stream's one event, which the SDK reads: it
  // throws an Error whose cause is the JSON-RPC error (a JSON body had no cause).
  try {
    for await (const _event of client.resubscribeTask({ id: 'no-such-task' })) { /* none */ }
    seen.unknownStream = null;
  } catch (error) {
    const cause = error.cause ?? error;
    seen.unknownStream = { taskNotFound: cause instanceof TaskNotFoundError, name: cause.constructor.name };
  }
  console.log(JSON.stringify(seen));
}

main().catch((error) => {
  console.error(error?.stack ?? error);
  process.exit(1);
});
