// An A2A 1.0 client scenario against the platform, run with the official JavaScript SDK
// (@a2a-js/sdk): an independent client, importing nothing of the platform.
//
//   node client.mjs BASE_URL TOKEN BINDING SKILL_ID HOOK_URL
//
// BINDING is JSONRPC or HTTP+JSON: the client discovers the platform from its card and
// prefers that binding. It sends (blocking), gets, lists, sends without blocking and
// cancels, streams, subscribes across an INPUT_REQUIRED round trip, sends with a push
// config and creates, reads, lists and deletes another, and asks for an unknown task. It
// prints one JSON object saying what it saw; the test asserts on it.
import { randomUUID } from 'node:crypto';
import { bearerFetch, errorOf } from './peer_common.mjs';
import { Role, TaskState } from '@a2a-js/sdk';
import { TaskNotFoundError } from '@a2a-js/sdk/errors';
import { ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory, RestTransportFactory } from '@a2a-js/sdk/client';

const [base, token, binding, skillId, hook] = process.argv.slice(2);

// The caller's bearer token on every request the transports make.
const fetchImpl = bearerFetch(token);

const stateName = (state) => TaskState[state] ?? String(state);

function message(behaviour, extra = {}, task = undefined) {
  return {
    messageId: randomUUID(),
    role: Role.ROLE_USER,
    parts: [{ content: { $case: 'data', value: { product: 'lamp', behaviour, ...extra } }, metadata: undefined, filename: '', mediaType: '' }],
    contextId: task?.contextId ?? '',
    taskId: task?.id ?? '',
    extensions: [],
    metadata: { skillId },
    referenceTaskIds: [],
  };
}

function request(msg, configuration = {}) {
  return {
    tenant: '',
    message: msg,
    configuration: { acceptedOutputModes: [], taskPushNotificationConfig: undefined, returnImmediately: false, ...configuration },
    metadata: undefined,
  };
}

// The state each streamed event tells, as it arrives.
async function streamedStates(stream) {
  const seen = [];
  for await (const event of stream) {
    const payload = event.payload;
    if (payload?.$case === 'task') seen.push(stateName(payload.value.status.state));
    if (payload?.$case === 'statusUpdate') seen.push(stateName(payload.value.status.state));
  }
  return seen;
}

async function main() {
  const seen = {};
  const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [new JsonRpcTransportFactory({ fetchImpl }), new RestTransportFactory({ fetchImpl })],
    preferredTransports: [binding],
  }));
  const client = await factory.createFromUrl(base);
  seen.transport = client.transport.constructor.name;
  // getAgentCard() reads the extended card (the public one offers it) with the caller's
  // token: its skills name the agents offering them.
  seen.extendedSkills = (await client.getAgentCard()).skills.map((skill) => skill.description);

  // Blocking send: the finished task with the agent's artifact.
  const done = await client.sendMessage(request(message('complete')));
  seen.send = {
    state: stateName(done.status.state),
    artifact: done.artifacts?.[0]?.parts?.[0]?.content?.value ?? null,
  };
  const got = await client.getTask({ tenant: '', id: done.id, historyLength: 1 });
  seen.get = { same: got.id === done.id, state: stateName(got.status.state), history: got.history.length };
  const listed = await client.listTasks({ tenant: '', contextId: done.contextId, status: TaskState.TASK_STATE_UNSPECIFIED, pageSize: 10, pageToken: '' });
  seen.list = listed.tasks.map((task) => task.id === done.id);

  // Without blocking, then cancel.
  const busy = await client.sendMessage(request(message('working'), { returnImmediately: true }));
  seen.busy = stateName(busy.status.state);
  await new Promise((resolve) => setTimeout(resolve, 500));
  const canceled = await client.cancelTask({ tenant: '', id: busy.id, metadata: undefined });
  seen.cancel = stateName(canceled.status.state);

  // Streaming send.
  seen.stream = await streamedStates(client.sendMessageStream(request(message('slow', { seconds: 0.3 }))));

  // INPUT_REQUIRED, a subscription open across the answer.
  const asked = await client.sendMessage(request(message('ask')));
  seen.asked = stateName(asked.status.state);
  const following = streamedStates(client.resubscribeTask({ tenant: '', id: asked.id }));
  await new Promise((resolve) => setTimeout(resolve, 1000));
  const answered = await client.sendMessage(request(message('answer', { answer: 'EU' }, asked)));
  seen.answered = stateName(answered.status.state);
  seen.answer = answered.artifacts?.[0]?.parts?.[0]?.content?.value?.answer ?? null;
  seen.subscribed = await following;

  // A push config on the send: the platform posts the task's events to the hook.
  const pushed = await client.sendMessage(request(message('complete'), {
    returnImmediately: true,
    taskPushNotificationConfig: { tenant: '', id: 'on-send', taskId: '', url: hook, token: 'tok-js-1', authentication: undefined },
  }));
  seen.pushedTask = pushed.id;

  // Push configs by hand: create, get, list, delete.
  const config = { tenant: '', id: 'hook-js', taskId: asked.id, url: hook, token: 'tok-js-2', authentication: { scheme: 'Bearer', credentials: 'hook-secret' } };
  const created = await client.createTaskPushNotificationConfig(config);
  const read = await client.getTaskPushNotificationConfig({ tenant: '', taskId: asked.id, id: 'hook-js' });
  const all = await client.listTaskPushNotificationConfig({ tenant: '', taskId: asked.id, pageSize: 10, pageToken: '' });
  await client.deleteTaskPushNotificationConfig({ tenant: '', taskId: asked.id, id: 'hook-js' });
  const after = await client.listTaskPushNotificationConfig({ tenant: '', taskId: asked.id, pageSize: 10, pageToken: '' });
  seen.push = {
    created: created.url === hook && created.taskId === asked.id,
    read: read.token,
    scheme: read.authentication?.scheme ?? null,
    listed: all.configs.map((c) => c.id),
    after: after.configs.length,
  };

  // An unknown task: the SDK's own error for it.
  seen.unknown = await errorOf(() => client.getTask({ tenant: '', id: 'no-such-task' }), TaskNotFoundError);
  seen.unknownCancel = await errorOf(() => client.cancelTask({ tenant: '', id: 'no-such-task', metadata: undefined }), TaskNotFoundError);
  console.log(JSON.stringify(seen));
}

main().catch((error) => {
  console.error(error?.stack ?? error);
  process.exit(1);
});
