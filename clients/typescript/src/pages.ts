// Pagers over list operations: follow `next_cursor` from the first page to the last.

/** A page of a list operation. */
export interface Page<Item> {
  items: Item[];
  next_cursor?: string | null;
}

/** Every page, `fetchPage(cursor)` giving the page at `cursor` (undefined: the first). */
export async function* pages<P extends Page<unknown>>(
  fetchPage: (cursor: string | undefined) => Promise<P>,
): AsyncGenerator<P, void, undefined> {
  let cursor: string | undefined;
  for (;;) {
    const page = await fetchPage(cursor);
    yield page;
    if (!page.next_cursor) return;
    cursor = page.next_cursor;
  }
}

/** Every item of every page. */
export async function* items<Item>(
  fetchPage: (cursor: string | undefined) => Promise<Page<Item>>,
): AsyncGenerator<Item, void, undefined> {
  for await (const page of pages(fetchPage)) yield* page.items;
}
