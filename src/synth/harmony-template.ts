/**
 * A chat template of the shape gpt-oss files carry (tokenizer.chat_template): OpenAI's Harmony
 * format, written here from its public description (no model file was at hand to copy from).
 *
 *   <|start|>system<|message|>{identity, knowledge cutoff, date, reasoning effort, channels}<|end|>
 *   <|start|>developer<|message|># Instructions\n\n{first system / developer message}\n\n# Tools ...<|end|>
 *   <|start|>user<|message|>{content}<|end|>
 *   <|start|>assistant<|channel|>final<|message|>{content}<|end|>        an earlier answer (reasoning dropped)
 *   <|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json<|message|>{args}<|call|>
 *   <|start|>functions.f to=assistant<|channel|>commentary<|message|>{result}<|end|>
 *   <|start|>assistant                                                   the generation prompt
 *
 * The model answers on channels: `analysis` (its reasoning) and then `final`, ending with
 * <|return|>, or `commentary` with a tool call ending with <|call|>. Like the published template it
 * builds the system message itself (strftime_now for the date), takes the first system or developer
 * message as the developer's instructions, renders function tools as a TypeScript namespace through
 * recursive macros, keeps the last tool call's name in a namespace(), and refuses channel tags in
 * message text and roles it has no place for (raise_exception). Optional variables: tools,
 * model_identity, reasoning_effort (default "medium"); a message may carry thinking and tool_calls.
 */
export const HARMONY_TEMPLATE = String.raw`{#- Harmony (gpt-oss): see src/synth/harmony-template.ts -#}
{%- macro ts_type(spec) -%}
  {%- if spec.type == "array" -%}
    {{- (ts_type(spec["items"]) if spec["items"] is defined else "any") + "[]" -}}
  {%- elif spec.type == "string" and spec.enum is defined -%}
    {{- '"' + spec.enum | join('" | "') + '"' -}}
  {%- elif spec.type == "string" -%}
    {{- "string" -}}
  {%- elif spec.type == "number" or spec.type == "integer" -%}
    {{- "number" -}}
  {%- elif spec.type == "boolean" -%}
    {{- "boolean" -}}
  {%- elif spec.type == "object" and spec.properties is defined -%}
    {{- "{ " -}}
    {%- for name, inner in spec.properties.items() -%}
      {{- name + ("" if spec.required is defined and name in spec.required else "?") + ": " + ts_type(inner) + ", " -}}
    {%- endfor -%}
    {{- "}" -}}
  {%- else -%}
    {{- "any" -}}
  {%- endif -%}
{%- endmacro -%}
{%- macro tool_namespace(name, tools) -%}
  {{- "## " + name + "\n\nnamespace " + name + " {\n\n" -}}
  {%- for tool in tools -%}
    {%- set fn = tool.function if tool.function is defined else tool -%}
    {%- if fn.description is defined -%}
      {{- "// " + fn.description + "\n" -}}
    {%- endif -%}
    {%- if fn.parameters is defined and fn.parameters.properties is defined -%}
      {{- "type " + fn.name + " = (_: {\n" -}}
      {%- for param, spec in fn.parameters.properties.items() -%}
        {%- if spec.description is defined -%}
          {{- "// " + spec.description + "\n" -}}
        {%- endif -%}
        {%- set optional = not (fn.parameters.required is defined and param in fn.parameters.required) -%}
        {{- param + ("?" if optional else "") + ": " + ts_type(spec) + ",\n" -}}
      {%- endfor -%}
      {{- "}) => any;\n\n" -}}
    {%- else -%}
      {{- "type " + fn.name + " = () => any;\n\n" -}}
    {%- endif -%}
  {%- endfor -%}
  {{- "} // namespace " + name -}}
{%- endmacro -%}
{%- macro system_message() -%}
  {{- (model_identity if model_identity is defined else "You are ChatGPT, a large language model trained by OpenAI.") + "\n" -}}
  {{- "Knowledge cutoff: 2024-06\n" -}}
  {{- "Current date: " + strftime_now("%Y-%m-%d") + "\n\n" -}}
  {{- "Reasoning: " + (reasoning_effort if reasoning_effort is defined else "medium") + "\n\n" -}}
  {{- "# Valid channels: analysis, commentary, final. Channel must be included for every message." -}}
  {%- if tools is defined and tools -%}
    {{- "\nCalls to these tools must go to the commentary channel: 'functions'." -}}
  {%- endif -%}
{%- endmacro -%}
{{- "<|start|>system<|message|>" + system_message() + "<|end|>" -}}
{%- if messages[0].role == "system" or messages[0].role == "developer" -%}
  {%- set instructions = messages[0].content -%}
  {%- set turns = messages[1:] -%}
{%- else -%}
  {%- set instructions = "" -%}
  {%- set turns = messages -%}
{%- endif -%}
{%- if instructions or (tools is defined and tools) -%}
  {{- "<|start|>developer<|message|>" -}}
  {%- if instructions -%}
    {{- "# Instructions\n\n" + instructions + "\n\n" -}}
  {%- endif -%}
  {%- if tools is defined and tools -%}
    {{- "# Tools\n\n" + tool_namespace("functions", tools) -}}
  {%- endif -%}
  {{- "<|end|>" -}}
{%- endif -%}
{%- set last_call = namespace(name=none) -%}
{%- for message in turns -%}
  {%- if message.role == "assistant" -%}
    {%- set thinking = message.thinking if message.thinking is defined and message.thinking else "" -%}
    {%- if "<|channel|>" in (message.content or "") or "<|channel|>" in thinking -%}
      {{- raise_exception("Pass an assistant message's reasoning as thinking and its answer as content, without Harmony's <|channel|> tags.") -}}
    {%- endif -%}
    {%- if message.tool_calls is defined and message.tool_calls -%}
      {%- set call = message.tool_calls[0].function if message.tool_calls[0].function is defined else message.tool_calls[0] -%}
      {%- if thinking or message.content -%}
        {{- "<|start|>assistant<|channel|>analysis<|message|>" + (thinking or message.content) + "<|end|>" -}}
      {%- endif -%}
      {{- "<|start|>assistant<|channel|>commentary to=functions." + call.name + " <|constrain|>json<|message|>" -}}
      {{- call.arguments if call.arguments is string else call.arguments | tojson -}}
      {{- "<|call|>" -}}
      {%- set last_call.name = call.name -%}
    {%- elif loop.last and not add_generation_prompt -%}
      {%- if thinking -%}
        {{- "<|start|>assistant<|channel|>analysis<|message|>" + thinking + "<|end|>" -}}
      {%- endif -%}
      {{- "<|start|>assistant<|channel|>final<|message|>" + message.content + "<|return|>" -}}
    {%- else -%}
      {{- "<|start|>assistant<|channel|>final<|message|>" + message.content + "<|end|>" -}}
      {%- set last_call.name = none -%}
    {%- endif -%}
  {%- elif message.role == "tool" -%}
    {%- if last_call.name is none -%}
      {{- raise_exception("A tool message must follow an assistant message with a tool call.") -}}
    {%- endif -%}
    {{- "<|start|>functions." + last_call.name + " to=assistant<|channel|>commentary<|message|>" + message.content + "<|end|>" -}}
  {%- elif message.role == "user" -%}
    {{- "<|start|>user<|message|>" + message.content + "<|end|>" -}}
  {%- else -%}
    {{- raise_exception("Harmony has no place for a " + message.role + " message after the first message.") -}}
  {%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
  {{- "<|start|>assistant" -}}
{%- endif -%}`;
