// An A2A 1.0 agent built with the official JavaScript SDK (@a2a-js/sdk) and Express, for
// the platform's tests: an independent peer, importing nothing of the platform.
//
//   node agent.mjs [--bindings rest,jsonrpc] [--push]
//
// Listens on 127.0.0.1 (a free port) and prints one JSON line {"url": ...} when ready.
// The card (/.well-known/agent-card.json) lists HTTP+JSON at /rest and JSON-RPC at /rpc,
// in the order given; with --push it offers push notifications and the SDK's own sender
// POSTs every event to the webhook a send configures. What the agent does is chosen per
// task by the message's data part, `behaviour`:
//   complete  WORKING, an artifact {"verdict": "pass"}, COMPLETED
//   slow      the same after `seconds` (a cancel in between ends it CANCELED)
//   ask       INPUT_REQUIRED; the reply completes it with {"verdict": "pass", "answer": ...}
//   fail      FAILED with a message
// GET /_stats answers {"requests": {"METHOD path": n}, "pushes": n, "pushFailures": n,
// "pushing": n in flight, "lastPushAt": ms}.
import express from 'express';
import { countPushes, countRequests, option } from './peer_common.mjs';
import { randomUUID } from 'node:crypto';
import { A2A_PROTOCOL_VERSION, AGENT_CARD_PATH, Role, TaskState } from '@a2a-js/sdk';
import {
  AgentEvent,
  DefaultPushNotificationSender,
  DefaultRequestHandler,
  InMemoryPushNotificationStore,
  InMemoryTaskStore,
} from '@a2a-js/sdk/server';
import { agentCardHandler, jsonRpcHandler, restHandler, UserBuilder } from '@a2a-js/sdk/server/express';

const bindings = option('--bindings', 'rest,jsonrpc').split(',');
const push = process.argv.includes('--push');

const now = () => new Date().toISOString();
const dataPart = (value) => ({ content: { $case: 'data', value }, metadata: undefined, filename: '', mediaType: 'application/json' });
const textPart = (value) => ({ content: { $case: 'text', value }, metadata: undefined, filename: '', mediaType: 'text/plain' });

function dataOf(message) {
  for (const part of message?.parts ?? []) {
    if (part.content?.$case === 'data') return part.content.value ?? {};
  }
  return {};
}

function textOf(message) {
  for (const part of message?.parts ?? []) {
    if (part.content?.$case === 'text') return part.content.value;
  }
  return undefined;
}

class TestExecutor {
  canceled = new Set();

  cancelTask = async (taskId) => {
    this.canceled.add(taskId);
  };

  async execute(context, bus) {
    const { taskId, contextId, userMessage } = context;
    const status = (state, message) => bus.publish(AgentEvent.statusUpdate({
      taskId, contextId, status: { state, timestamp: now(), message }, metadata: undefined,
    }));
    const agentMessage = (part) => ({
      role: Role.ROLE_AGENT, messageId: randomUUID(), parts: [part], taskId, contextId,
      extensions: [], metadata: undefined, referenceTaskIds: [],
    });
    const finish = (output) => {
      bus.publish(AgentEvent.artifactUpdate({
        taskId, contextId, append: false, lastChunk: true, metadata: undefined,
        artifact: { artifactId: 'result', name: 'result', description: '', parts: [dataPart(output)], metadata: undefined, extensions: [] },
      }));
      status(TaskState.TASK_STATE_COMPLETED);
    };
    try {
      if (context.task?.status?.state === TaskState.TASK_STATE_INPUT_REQUIRED) {
        const reply = textOf(userMessage) ?? dataOf(userMessage);
        status(TaskState.TASK_STATE_WORKING);
        finish({ verdict: 'pass', answer: reply });
        return;
      }
      const data = dataOf(userMessage);
      if (!context.task) {
        bus.publish(AgentEvent.task({
          id: taskId, contextId, status: { state: TaskState.TASK_STATE_SUBMITTED, timestamp: now(), message: undefined },
          artifacts: [], history: [userMessage], metadata: undefined,
        }));
      }
      status(TaskState.TASK_STATE_WORKING);
      switch (data.behaviour) {
        case 'slow': {
          const until = Date.now() + 1000 * Number(data.seconds ?? 1);
          while (Date.now() < until && !this.canceled.has(taskId)) {
            await new Promise((resolve) => setTimeout(resolve, 50));
          }
          if (this.canceled.has(taskId)) status(TaskState.TASK_STATE_CANCELED);
          else finish({ verdict: 'pass' });
          return;
        }
        case 'ask':
          status(TaskState.TASK_STATE_INPUT_REQUIRED, agentMessage(textPart('Which market?')));
          return;
        case 'fail':
          status(TaskState.TASK_STATE_FAILED, agentMessage(textPart('The product cannot be reviewed.')));
          return;
        default:
          finish({ verdict: 'pass' });
      }
    } finally {
      this.canceled.delete(taskId);
    }
  }
}

countPushes();

const server = express();
countRequests(server);

const listener = server.listen(0, '127.0.0.1', () => {
  const base = `http://127.0.0.1:${listener.address().port}`;
  const interfaces = bindings.map((binding) => ({
    url: binding === 'rest' ? `${base}/rest` : `${base}/rpc`,
    protocolBinding: binding === 'rest' ? 'HTTP+JSON' : 'JSONRPC',
    tenant: '',
    protocolVersion: A2A_PROTOCOL_VERSION,
  }));
  const card = {
    name: 'JS SDK test agent',
    description: 'An @a2a-js/sdk agent for the platform tests.',
    supportedInterfaces: interfaces,
    version: '1.0.0',
    capabilities: { streaming: true, pushNotifications: push, extensions: [], extendedAgentCard: false },
    securitySchemes: {},
    securityRequirements: [],
    defaultInputModes: ['application/json', 'text/plain'],
    defaultOutputModes: ['application/json'],
    skills: [{ id: 'ce-review', name: 'CE review', description: 'Reviews a product.', tags: ['compliance'], examples: [], inputModes: [], outputModes: [], securityRequirements: [] }],
    documentationUrl: '',
    signatures: [],
  };
  const pushStore = new InMemoryPushNotificationStore();
  const requestHandler = new DefaultRequestHandler(
    card, new InMemoryTaskStore(), new TestExecutor(), undefined,
    push ? pushStore : undefined, push ? new DefaultPushNotificationSender(pushStore) : undefined,
  );
  const userBuilder = UserBuilder.noAuthentication;
  server.use(`/${AGENT_CARD_PATH}`, agentCardHandler({ agentCardProvider: requestHandler }));
  if (bindings.includes('rest')) server.use('/rest', restHandler({ requestHandler, userBuilder }));
  if (bindings.includes('jsonrpc')) server.use('/rpc', jsonRpcHandler({ requestHandler, userBuilder }));
  console.log(JSON.stringify({ url: base }));
});
