// The package entry point: the generated SDK functions, types and fetch client.
export * from './generated';
export { createClient, createConfig } from './generated/client';
