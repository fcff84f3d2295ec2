"""Host-side tool system: plugin authoring API, loading, policy, contracts and the per-cell catalog.

Plugin authors import from here: ``from service.tools import ToolRegistry, ToolResult, define_tool``.
"""

from service.tools.approvals import NeedsApproval
from service.tools.errors import ToolCallError, ToolConfigError, ToolError
from service.tools.hooks import AfterResult, Block, HookCall
from service.tools.plugin import ToolContext, ToolRegistry, ToolResult, ToolSpec, define_tool

__all__ = [
    "AfterResult",
    "Block",
    "HookCall",
    "NeedsApproval",
    "ToolCallError",
    "ToolConfigError",
    "ToolContext",
    "ToolError",
    "ToolRegistry",
    "ToolResult",
    "ToolSpec",
    "define_tool",
]
