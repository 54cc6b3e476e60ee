// An A2A 0.3 agent built with the official JavaScript SDK of that version (@a2a-js/sdk
// 0.3.14) and Express, for the platform's tests: an independent peer, importing nothing
// of the platform. The same options and behaviours as agent.mjs, in 0.3 shapes:
//
//   node agent03.mjs [--bindings jsonrpc,rest] [--push]
//
// The card (protocolVersion 0.3.0) names the first binding as `url`/`preferredTransport`
// and all of them in `additionalInterfaces`: JSON-RPC at /rpc, HTTP+JSON at /rest.
import express from 'express';
import { countPushes, countRequests, option } from './peer_common.mjs';
import { randomUUID } from 'node:crypto';
import { AGENT_CARD_PATH } from '@a2a-js/sdk';
import {
  DefaultPushNotificationSender,
  DefaultRequestHandler,
  InMemoryPushNotificationStore,
  InMemoryTaskStore,
} from '@a2a-js/sdk/server';
import { agentCardHandler, jsonRpcHandler, restHandler, UserBuilder } from '@a2a-js/sdk/server/express';

const bindings = option('--bindings', 'jsonrpc,rest').split(',');
const push = process.argv.includes('--push');

const now = () => new Date().toISOString();
const FINAL = new Set(['completed', 'canceled', 'failed', 'rejected', 'input-required', 'auth-required']);

function dataOf(message) {
  return message?.parts?.find((part) => part.kind === 'data')?.data ?? {};
}

function textOf(message) {
  return message?.parts?.find((part) => part.kind === 'text')?.text;
}

class TestExecutor {
  canceled = new Set();

  cancelTask = async (taskId) => {
    this.canceled.add(taskId);
  };

  async execute(context, bus) {
    const { taskId, contextId, userMessage } = context;
    const status = (state, message) => bus.publish({
      kind: 'status-update', taskId, contextId, final: FINAL.has(state),
      status: { state, timestamp: now(), message },
    });
    const agentMessage = (text) => ({
      kind: 'message', role: 'agent', messageId: randomUUID(), parts: [{ kind: 'text', text }], taskId, contextId,
    });
    const finish = (output) => {
      bus.publish({
        kind: 'artifact-update', taskId, contextId, append: false, lastChunk: true,
        artifact: { artifactId: 'result', name: 'result', parts: [{ kind: 'data', data: output }] },
      });
      status('completed');
    };
    try {
      if (context.task?.status?.state === 'input-required') {
        status('working');
        finish({ verdict: 'pass', answer: textOf(userMessage) ?? dataOf(userMessage) });
        return;
      }
      const data = dataOf(userMessage);
      if (!context.task) {
        bus.publish({
          kind: 'task', id: taskId, contextId, status: { state: 'submitted', timestamp: now() }, history: [userMessage],
        });
      }
      status('working');
      switch (data.behaviour) {
        case 'slow': {
          const until = Date.now() + 1000 * Number(data.seconds ?? 1);
          while (Date.now() < until && !this.canceled.has(taskId)) {
            await new Promise((resolve) => setTimeout(resolve, 50));
          }
          if (this.canceled.has(taskId)) status('canceled');
          else finish({ verdict: 'pass' });
          return;
        }
        case 'ask':
          status('input-required', agentMessage('Which market?'));
          return;
        case 'fail':
          status('failed', agentMessage('The product cannot be reviewed.'));
          return;
        default:
          finish({ verdict: 'pass' });
      }
    } finally {
      this.canceled.delete(taskId);
      bus.finished();
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
    transport: binding === 'rest' ? 'HTTP+JSON' : 'JSONRPC',
  }));
  const card = {
    name: 'JS SDK 0.3 test agent',
    description: 'An @a2a-js/sdk 0.3 agent for the platform tests.',
    protocolVersion: '0.3.0',
    version: '1.0.0',
    url: interfaces[0].url,
    preferredTransport: interfaces[0].transport,
    additionalInterfaces: interfaces,
    capabilities: { streaming: true, pushNotifications: push },
    defaultInputModes: ['application/json', 'text/plain'],
    defaultOutputModes: ['application/json'],
    skills: [{ id: 'ce-review', name: 'CE review', description: 'Reviews a product.', tags: ['compliance'] }],
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
