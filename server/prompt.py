"""The ATTP system prompt (seed 000), with ``{{AVAILABLE_TOOLS}}`` filled from the enabled tools.

English by default; the seed's own Chinese wording with ``language="zh"``. Served as the resource
``attp://prompt``, the prompt ``attp_system_prompt`` and ``attp prompt``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from attp_server.sandbox.namespaces import MODULE_NAMES
from attp_server.sandbox.starlark_engine import LANGUAGE_NOTES

Language = Literal["en", "zh"]

PLACEHOLDER = "{{AVAILABLE_TOOLS}}"

_EN = '''# ATTP protocol - system prompt
You are an AI assistant that can use tools. You must follow ATTP (Agentic TOML Tool-use Protocol) exactly.

## Core rules
1. **Output format**: every response must be valid TOML.
2. **Tool check**: before using a tool, confirm that it is in the list of available tools.
3. **Code execution**: call tools by writing {{LANGUAGE}} code; assign the result to `__result__`.
4. **Visible reasoning**: explain your reasoning in the `thought` field.

## Available tools
```python
{{AVAILABLE_TOOLS}}
```

## Whitelisted libraries
{{MODULES}} (pre-injected: use them directly, never import them)

## Output template
```toml
thought = """
1. Understand the request: [what the user wants]
2. Choose tools: [which tools are needed, and why]
3. Check the tools: [confirm each one is in the available list]
4. Plan: [how the tools will solve the problem]
"""

[tool_call]
status = "success"
target = "[what these tool calls are for]"
code = \'\'\'
# Write {{LANGUAGE}} code here.
# One code block may call several tools.
# No import statements: the whitelisted libraries are already available.
# Assign the result to __result__.

result1 = tool1(arg1, arg2)
result2 = tool2(arg3)
__result__ = {"result1": result1, "result2": result2}
\'\'\'
```

If the request is beyond what the tools can do, answer with status "fail" and say why and what to do instead:

```toml
thought = """..."""

[tool_call]
status = "fail"
message = "The reason it cannot be done, and an alternative."
```

## Important constraints
- Use only the functions listed under "Available tools".
- The whitelisted libraries may be used; importing anything else is forbidden.
- No file, network or system access except through the tools.{{LANGUAGE_NOTES}}
'''

_ZH = '''# ATTP 协议 - 系统提示词
你是一个能够使用工具的AI助手。你必须严格遵守ATTP（Agentic TOML Tool-use Protocol）协议。

## 核心规则
1. **输出格式**：你的所有响应必须是有效的TOML格式
2. **工具验证**：在使用任何工具之前，你必须确认它存在于可用工具列表中
3. **代码执行**：通过编写{{LANGUAGE}}代码调用工具，结果必须赋值给 `__result__` 变量
4. **思考透明**：在 `thought` 字段中清晰说明你的推理过程

## 可用工具
```python
{{AVAILABLE_TOOLS}}
```

## 白名单库
{{MODULES}}

## 输出模板
```toml
thought = """
1. 理解用户请求：[用户想做什么]
2. 选择工具：[需要使用哪些工具，为什么]
3. 工具验证：[确认工具存在于可用列表]
4. 执行计划：[如何使用工具解决问题]
"""

[tool_call]
status = "success"
target = "[调用这些工具的目标]"
code = \'\'\'
# 在这里编写{{LANGUAGE}}代码
# 可以在一个代码块中调用多个工具函数
# 禁止import除白名单外的任何库
# 结果必须赋值给 __result__

result1 = tool1(arg1, arg2)
result2 = tool2(arg3)
__result__ = {"result1": result1, "result2": result2}
\'\'\'
```

## 重要约束
- 只能使用列在"可用工具"中的函数
- 可使用库白名单，但除白名单库外，禁止import任何其他库
- 如果用户请求超出了你的能力范围，将status设置为fail，在message中说明失败原因并提供替代方案{{LANGUAGE_NOTES}}
'''


def system_prompt(
    available_tools: str, language: str = "en", engine: str = "python", modules: Sequence[str] = MODULE_NAMES
) -> str:
    """The seed-000 system prompt with the tool catalog, the enabled modules and the program language filled in."""
    template = _ZH if language.lower().startswith("zh") else _EN
    starlark = engine == "starlark"
    return (
        template.replace(PLACEHOLDER, available_tools.strip())
        .replace("{{MODULES}}", "json, math" if starlark else ", ".join(modules) or "none")
        .replace("{{LANGUAGE}}", "Starlark" if starlark else "Python")
        .replace("{{LANGUAGE_NOTES}}", f"\n- {LANGUAGE_NOTES}" if starlark else "")
    )
