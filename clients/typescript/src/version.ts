// The package version: the version of the API (`info.version` of docs/openapi.json) it was
// generated from, so a client release names the API it speaks (written by clients/generate.py).
export const VERSION = '0.1.0';
