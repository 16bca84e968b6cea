// Test-only stand-in for '@temporalio/workflow' in the bundle of old-shape-histories.test.ts: the
// real module, except that patched(id) answers false for every patch id the run's memo lists under
// PATCHES_OFF_MEMO, without recording a marker. Such a run takes the branch a run recorded before
// the patch takes, and its history has the pre-patch shape. Nothing outside that test bundles it.
import { patched as realPatched, workflowInfo } from '@temporalio/workflow/lib/index.js';

export * from '@temporalio/workflow/lib/index.js';

/** The memo key naming the patches a run takes as absent. */
export const PATCHES_OFF_MEMO = 'synctide_test_patches_off';

export function patched(patchId: string): boolean {
  const off = workflowInfo().memo?.[PATCHES_OFF_MEMO];
  if (Array.isArray(off) && off.includes(patchId)) return false;
  return realPatched(patchId);
}
