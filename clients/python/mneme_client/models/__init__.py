"""Contains all the data models used in inputs/outputs"""

from .account_overlay_update import AccountOverlayUpdate
from .api_key_create import ApiKeyCreate
from .api_key_created import ApiKeyCreated
from .api_key_read import ApiKeyRead
from .applied_add import AppliedAdd
from .applied_remove import AppliedRemove
from .applied_replace import AppliedReplace
from .audit_entry_read import AuditEntryRead
from .audit_entry_read_detail import AuditEntryReadDetail
from .compact_request import CompactRequest
from .compact_result import CompactResult
from .compact_result_dropped import CompactResultDropped
from .compact_result_status import CompactResultStatus
from .component_scores import ComponentScores
from .context_format import ContextFormat
from .context_item import ContextItem
from .context_request import ContextRequest
from .context_response import ContextResponse
from .context_response_omitted import ContextResponseOmitted
from .context_response_summarization_type_0 import ContextResponseSummarizationType0
from .context_section import ContextSection
from .context_section_name import ContextSectionName
from .field_error import FieldError
from .fusion_method import FusionMethod
from .health import Health
from .import_report import ImportReport
from .import_report_imported import ImportReportImported
from .job_count_read import JobCountRead
from .job_failure_read import JobFailureRead
from .keyed_memory_put import KeyedMemoryPut
from .keyed_memory_written import KeyedMemoryWritten
from .lifecycle import Lifecycle
from .memories_deleted import MemoriesDeleted
from .memory_batch_create import MemoryBatchCreate
from .memory_batch_written import MemoryBatchWritten
from .memory_counts import MemoryCounts
from .memory_create import MemoryCreate
from .memory_event_read import MemoryEventRead
from .memory_event_read_action import MemoryEventReadAction
from .memory_event_read_changes import MemoryEventReadChanges
from .memory_history import MemoryHistory
from .memory_kind import MemoryKind
from .memory_read import MemoryRead
from .memory_scope import MemoryScope
from .memory_update import MemoryUpdate
from .memory_written import MemoryWritten
from .message_in import MessageIn
from .message_in_tool_calls_type_0_item import MessageInToolCallsType0Item
from .message_page import MessagePage
from .message_read import MessageRead
from .message_read_tool_calls_type_0_item import MessageReadToolCallsType0Item
from .message_role import MessageRole
from .messages_append import MessagesAppend
from .messages_appended import MessagesAppended
from .metadata import Metadata
from .new_lifecycle import NewLifecycle
from .page_api_key_read import PageApiKeyRead
from .page_audit_entry_read import PageAuditEntryRead
from .page_memory_read import PageMemoryRead
from .page_thread_read import PageThreadRead
from .page_user_overview import PageUserOverview
from .pass_read import PassRead
from .pass_read_dropped import PassReadDropped
from .pass_read_mode import PassReadMode
from .patch_add import PatchAdd
from .patch_remove import PatchRemove
from .patch_replace import PatchReplace
from .pending_job_read import PendingJobRead
from .problem import Problem
from .problem_code import ProblemCode
from .procedure_slot_read import ProcedureSlotRead
from .procedures import Procedures
from .procedures_update import ProceduresUpdate
from .profile_patch_result import ProfilePatchResult
from .profile_patch_result_after import ProfilePatchResultAfter
from .profile_patch_result_before import ProfilePatchResultBefore
from .profile_patch_result_sources import ProfilePatchResultSources
from .profile_read import ProfileRead
from .profile_read_profile import ProfileReadProfile
from .profile_read_sources import ProfileReadSources
from .profile_source import ProfileSource
from .purge_report import PurgeReport
from .purge_report_deleted import PurgeReportDeleted
from .purge_report_redacted import PurgeReportRedacted
from .purge_report_remaining import PurgeReportRemaining
from .queued_job_state import QueuedJobState
from .readiness import Readiness
from .rerun_queued import RerunQueued
from .rerun_request import RerunRequest
from .retention_policy import RetentionPolicy
from .search_hit import SearchHit
from .search_mode import SearchMode
from .search_request import SearchRequest
from .search_response import SearchResponse
from .stored_role import StoredRole
from .summaries_deleted import SummariesDeleted
from .summarization import Summarization
from .summarize_result import SummarizeResult
from .summarize_result_status import SummarizeResultStatus
from .summary_list import SummaryList
from .summary_pass_read import SummaryPassRead
from .summary_read import SummaryRead
from .summary_read_entries_item import SummaryReadEntriesItem
from .tenant_jobs import TenantJobs
from .thread_create import ThreadCreate
from .thread_deleted import ThreadDeleted
from .thread_deleted_deleted import ThreadDeletedDeleted
from .thread_read import ThreadRead
from .thread_update import ThreadUpdate
from .thread_window import ThreadWindow
from .turn_append import TurnAppend
from .turn_appended import TurnAppended
from .turn_context_options import TurnContextOptions
from .user_jobs import UserJobs
from .user_overview import UserOverview
from .user_read import UserRead
from .write_path_mode import WritePathMode

__all__ = (
    "AccountOverlayUpdate",
    "ApiKeyCreate",
    "ApiKeyCreated",
    "ApiKeyRead",
    "AppliedAdd",
    "AppliedRemove",
    "AppliedReplace",
    "AuditEntryRead",
    "AuditEntryReadDetail",
    "CompactRequest",
    "CompactResult",
    "CompactResultDropped",
    "CompactResultStatus",
    "ComponentScores",
    "ContextFormat",
    "ContextItem",
    "ContextRequest",
    "ContextResponse",
    "ContextResponseOmitted",
    "ContextResponseSummarizationType0",
    "ContextSection",
    "ContextSectionName",
    "FieldError",
    "FusionMethod",
    "Health",
    "ImportReport",
    "ImportReportImported",
    "JobCountRead",
    "JobFailureRead",
    "KeyedMemoryPut",
    "KeyedMemoryWritten",
    "Lifecycle",
    "MemoriesDeleted",
    "MemoryBatchCreate",
    "MemoryBatchWritten",
    "MemoryCounts",
    "MemoryCreate",
    "MemoryEventRead",
    "MemoryEventReadAction",
    "MemoryEventReadChanges",
    "MemoryHistory",
    "MemoryKind",
    "MemoryRead",
    "MemoryScope",
    "MemoryUpdate",
    "MemoryWritten",
    "MessageIn",
    "MessageInToolCallsType0Item",
    "MessagePage",
    "MessageRead",
    "MessageReadToolCallsType0Item",
    "MessageRole",
    "MessagesAppend",
    "MessagesAppended",
    "Metadata",
    "NewLifecycle",
    "PageApiKeyRead",
    "PageAuditEntryRead",
    "PageMemoryRead",
    "PageThreadRead",
    "PageUserOverview",
    "PassRead",
    "PassReadDropped",
    "PassReadMode",
    "PatchAdd",
    "PatchRemove",
    "PatchReplace",
    "PendingJobRead",
    "Problem",
    "ProblemCode",
    "Procedures",
    "ProcedureSlotRead",
    "ProceduresUpdate",
    "ProfilePatchResult",
    "ProfilePatchResultAfter",
    "ProfilePatchResultBefore",
    "ProfilePatchResultSources",
    "ProfileRead",
    "ProfileReadProfile",
    "ProfileReadSources",
    "ProfileSource",
    "PurgeReport",
    "PurgeReportDeleted",
    "PurgeReportRedacted",
    "PurgeReportRemaining",
    "QueuedJobState",
    "Readiness",
    "RerunQueued",
    "RerunRequest",
    "RetentionPolicy",
    "SearchHit",
    "SearchMode",
    "SearchRequest",
    "SearchResponse",
    "StoredRole",
    "SummariesDeleted",
    "Summarization",
    "SummarizeResult",
    "SummarizeResultStatus",
    "SummaryList",
    "SummaryPassRead",
    "SummaryRead",
    "SummaryReadEntriesItem",
    "TenantJobs",
    "ThreadCreate",
    "ThreadDeleted",
    "ThreadDeletedDeleted",
    "ThreadRead",
    "ThreadUpdate",
    "ThreadWindow",
    "TurnAppend",
    "TurnAppended",
    "TurnContextOptions",
    "UserJobs",
    "UserOverview",
    "UserRead",
    "WritePathMode",
)
